# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Data tables the checks evaluate against, as Python literals (they ship inside the modules' payload). Every row
names its public source; tests/unit/test_tables.py refuses a row without one. docs/checks.md lists them."""
