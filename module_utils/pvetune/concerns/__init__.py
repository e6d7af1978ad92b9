# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One module per concern (CPU frequency, C-states, NUMA balancing, PCIe, boot args, kernel, LXC GPU devices,
NVIDIA, IOMMU). A concern module holds the reader of its host state (used by the audit, the fix and the boot
helper alike) and the evaluators of its catalogue ids; its fix planner and boot-time re-application live in
``<concern>_fix.py`` next to it, so the audit's module payload carries no fix code.

Interface every concern module provides (audit.gather and audit.evaluate loop over them):

``SECTIONS``  tuple of (facts section name, reader); ``reader(ctx)`` returns the section's dict, where ``ctx`` has
              ``fsroot``, ``runner``, ``policy`` and ``facts`` (the sections read so far, for readers that build on
              another concern's section). A reader raises FsError for an unreadable input; gather records it.
``CHECKS``    {catalogue id: evaluator}; ``evaluator(facts, policy)`` returns one result (core/result.make_result).
"""
