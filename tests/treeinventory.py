"""The inventory the playbook tests run on: tree hosts (a snapshot or scratch root each, local connection, no
become, the controller's Python) in group gpu_hosts. Values are written as JSON, which YAML reads as they are."""
import json


def write_inventory(path, roots, host_vars=None, group_vars=None):
    """Write the inventory to ``path`` and return it (as given). ``roots``: {host: tree, or None for no
    pvetune_root}; ``host_vars``: {host: {name: value}}; ``group_vars``: {name: value} for gpu_hosts."""
    lines = ["all:", "  children:", "    gpu_hosts:", "      vars:", "        ansible_connection: local",
             "        ansible_become: false", "        ansible_python_interpreter: '{{ ansible_playbook_python }}'"]
    for key, value in (group_vars or {}).items():
        lines.append("        %s: %s" % (key, json.dumps(value)))
    lines.append("      hosts:")
    for host, root in roots.items():
        lines.append("        %s:" % host)
        if root is not None:
            lines.append("          pvetune_root: %s" % json.dumps(str(root)))
        for key, value in ((host_vars or {}).get(host) or {}).items():
            lines.append("          %s: %s" % (key, json.dumps(value)))
    with open(str(path), "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    return path
