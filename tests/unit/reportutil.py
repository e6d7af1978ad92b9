"""Shared by the report tests (test_report*.py): the demo fleet's real results, the JSON schema, documents, an
HTML parser that checks nesting, and registered pvetune_facts results as the audit play leaves them."""
import copy
import functools
import html.parser
import json
import os

import jsonschema
import yaml
from ansible.module_utils.pvetune.report import write as report
from ansible.module_utils.pvetune.audit import evaluate, gather
from ansible.module_utils.pvetune.core.cpuprofile import for_host
from ansible.module_utils.pvetune.core.fsroot import FsRoot
from ansible.module_utils.pvetune.core.policy import merge_policy

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCHEMA_PATH = os.path.join(TOP, "docs", "audit-report.schema.json")
DEMO = os.path.join(TOP, "demo", "snapshots")
HOSTS = ("pve-gpu01", "pve-gpu02", "pve-gpu03")
DEMO_HOSTS = ("pve-gpu01", "pve-gpu02", "pve-gpu03", "pve-gpu04", "pve-gpu05")
STATUSES = ("pass", "fail", "warn", "pending", "skip", "error")
GENERATED_AT = "2026-11-29T20:06:52Z"
INVENTORY = ["/work/main/inventory/demo"]

UNREACHABLE = {"host": "pve-gpu04", "root": "/", "checks": [], "unreachable": True,
               "error": "Failed to connect to the host via ssh: <script>alert(1)</script>"}
MODULE_FAILED = {"host": "pve-gpu05", "root": "/", "checks": [], "unreachable": False,
                 "error": "pvetune_policy.pcie_mrrs: must be one of (128, 256, 512, 1024, 2048, 4096)"}


def load_schema():
    with open(SCHEMA_PATH) as handle:
        data = json.load(handle)
    jsonschema.Draft202012Validator.check_schema(data)
    return data


def validate(doc, schema):
    jsonschema.Draft202012Validator(schema).validate(doc)


def demo_policy():
    with open(os.path.join(TOP, "inventory", "demo", "group_vars", "gpu_hosts.yml")) as handle:
        return merge_policy(yaml.safe_load(handle)["pvetune_policy"])


@functools.lru_cache(maxsize=None)
def _facts_result(host):
    policy = demo_policy()
    fs = FsRoot(os.path.join(DEMO, host))
    facts = gather(fs, None, policy)
    host_policy = for_host(policy, facts)
    return {"changed": False, "root": fs.root, "results": evaluate(facts, host_policy), "policy": host_policy}


def facts_result(host):
    """What `register: pvetune_audit` holds for a demo host (the parts the report reads); any of the five."""
    return copy.deepcopy(_facts_result(host))


def fleet_entries(count):
    """Report entries of a fleet of `count` hosts pve-gpu001.. from the five demo hosts' real audits repeated
    (host i audited like demo host i mod 5): the report at fleet scale without a playbook run."""
    return [report.entry_from_audit("pve-gpu%03d" % (i + 1), facts_result(DEMO_HOSTS[i % len(DEMO_HOSTS)]))
            for i in range(count)]


def demo_entries():
    """Report entries of the three demo hosts, as write_reports builds them."""
    return [report.entry_from_audit(host, facts_result(host)) for host in HOSTS]


def document(entries, fail_on="high", inventory=None):
    return report.build_document(entries, fail_on=fail_on, generated_at=GENERATED_AT,
                                 run={"playbook": "audit.yml", "hosts_pattern": "gpu_hosts",
                                      "inventory": INVENTORY if inventory is None else inventory})


class _Collector(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags = []
        self.text = []
        self.ids = []
        self.hrefs = []
        self.elements = []  # (tag, attrs, the stack of (tag, attrs) it is inside)
        self.stack = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.append(attrs["id"])
        if tag == "a" and "href" in attrs:
            self.hrefs.append(attrs["href"])
        self.elements.append((tag, attrs, list(self.stack)))
        if tag not in ("meta", "br", "img", "link", "input"):
            self.stack.append((tag, attrs))

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1][0] == tag, (tag, [t for t, _ in self.stack[-5:]])
        self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)
        if self.stack:
            self.stack[-1][1].setdefault("_text", []).append(data)


def parse_html(text):
    parser = _Collector()
    parser.feed(text)
    parser.close()
    assert parser.stack == [], parser.stack  # every element closed, properly nested
    return parser


def text_of(attrs):
    return "".join(attrs.get("_text", []))


def scripts(page):
    """The texts of the page's script elements: audit.html has one, the filter's (report_html_filter)."""
    return [text_of(a) for t, a, _ in page.elements if t == "script"]
