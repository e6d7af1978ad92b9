# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cstates concern's checks in the catalogue, as data.

The fields are core/catalogue.py's; the entries' concern is this package's name, their place in every list
core/catalogue.ORDER.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

ENTRIES = (
    {
        "id": "cpu.cstates",
        "summary": (
            "the limit of the idle driver in use effective (`processor.max_cstate=1` for acpi_idle, "
            "`intel_idle.max_cstate=1` for intel_idle), no enabled idle state deeper than C1"
        ),
        "title": "C-states: {cstate_arg} effective, nothing deeper than C{max_cstate} enabled",
        "severity": "high",
        "expected": "{cstate_arg} on /proc/cmdline and no enabled idle state deeper than C{max_cstate}",
        "rationale": (
            "Waking a core from a deep C-state costs tens to hundreds of microseconds; every GPU completion "
            "interrupt and every host-side step of the serving loop pays it."
        ),
        "remediation": (
            "Add {cstate_arg} to the kernel command line (the limit of {idle_driver}, the idle driver in use) and "
            "reboot; until then deeper states can be disabled at runtime through cpu*/cpuidle/state*/disable."
        ),
        "fix_tag": "cmdline",
        "fix_tags": ("cmdline", "cpu"),
        "reboot": "yes",
    },
)
