# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA GPU generations: how to recognise one, the kernel modules it needs, its first and its last driver.

A GPU's generation comes from the chip code name that starts its pci.ids name ("GB202GL [RTX PRO 6000 Blackwell
Server Edition]" -> GB2 -> Blackwell).  Without a pci.ids name it comes from the device-id ranges the display
functions of each generation occupy in pci.ids (computed from the code names of pci.ids Version 2026.08.22; the
generations' ids interleave only at the edges, which is why the names come first).  Every row cites its sources.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

PCI_IDS = "pci.ids Version 2026.08.22 (PCI ID Project), vendor 10de display functions by chip code name"

GENERATIONS_TABLE = (
    # key, name, chip code-name prefixes, device-id ranges of the display functions, open kernel modules
    # ("required", "supported", "unsupported") with its source, first driver with its source, last branch.
    {"key": "blackwell", "name": "Blackwell", "chips": ("GB1", "GB2"), "ranges": ((0x2900, 0x3340),),
     "open_modules": "required", "open_source": "TBD", "min_driver": None, "min_source": None,
     "max_branch": None, "max_source": None, "ids_source": PCI_IDS},
    {"key": "hopper", "name": "Hopper", "chips": ("GH1",), "ranges": ((0x2302, 0x23f0),),
     "open_modules": "supported", "open_source": "TBD", "min_driver": None, "min_source": None,
     "max_branch": None, "max_source": None, "ids_source": PCI_IDS},
    {"key": "ada", "name": "Ada Lovelace", "chips": ("AD1",), "ranges": ((0x2681, 0x28f8),),
     "open_modules": "supported", "open_source": "TBD", "min_driver": None, "min_source": None,
     "max_branch": None, "max_source": None, "ids_source": PCI_IDS},
    {"key": "ampere", "name": "Ampere", "chips": ("GA1",), "ranges": ((0x2080, 0x20ff), (0x2200, 0x223f),
                                                                     (0x2414, 0x25fb)),
     "open_modules": "supported", "open_source": "TBD", "min_driver": None, "min_source": None,
     "max_branch": None, "max_source": None, "ids_source": PCI_IDS},
    {"key": "turing", "name": "Turing", "chips": ("TU1",), "ranges": ((0x1e02, 0x1ff9), (0x2182, 0x21d1)),
     "open_modules": "supported", "open_source": "TBD", "min_driver": None, "min_source": None,
     "max_branch": None, "max_source": None, "ids_source": PCI_IDS},
    {"key": "volta", "name": "Volta", "chips": ("GV1",), "ranges": ((0x1d81, 0x1df6),),
     "open_modules": "unsupported", "open_source": "TBD", "min_driver": None, "min_source": None,
     "max_branch": None, "max_source": None, "ids_source": PCI_IDS},
    {"key": "pascal", "name": "Pascal", "chips": ("GP1",), "ranges": ((0x15c2, 0x15ff), (0x1725, 0x172f),
                                                                     (0x1b00, 0x1d56)),
     "open_modules": "unsupported", "open_source": "TBD", "min_driver": None, "min_source": None,
     "max_branch": None, "max_source": None, "ids_source": PCI_IDS},
    {"key": "maxwell", "name": "Maxwell", "chips": ("GM1", "GM2"), "ranges": ((0x1340, 0x1436), (0x1613, 0x1676),
                                                                             (0x174d, 0x17fd)),
     "open_modules": "unsupported", "open_source": "TBD", "min_driver": None, "min_source": None,
     "max_branch": None, "max_source": None, "ids_source": PCI_IDS},
)
GENERATIONS = {row["key"]: row for row in GENERATIONS_TABLE}
_CHIP = re.compile(r"\A(?:NVIDIA Corporation\s+)?((?:G[A-Z]|AD|TU)[0-9])[0-9]{2}")


def generation_of(device_id, model=None):
    """The generation key of an NVIDIA GPU from its pci.ids model name, else its device id; None when unknown."""
    match = _CHIP.match(model or "")
    if match:
        for row in GENERATIONS_TABLE:
            if match.group(1) in row["chips"]:
                return row["key"]
    if isinstance(device_id, str):
        device_id = int(device_id, 16) if re.match(r"\A(0x)?[0-9a-fA-F]{1,4}\Z", device_id) else None
    for row in GENERATIONS_TABLE if isinstance(device_id, int) else ():
        if any(lo <= device_id <= hi for lo, hi in row["ranges"]):
            return row["key"]
    return None
