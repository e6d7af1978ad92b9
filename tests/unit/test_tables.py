"""The data tables (module_utils/pvetune/tables): every row names its public source."""
import pytest

from ansible.module_utils.pvetune.tables import kernel_issues, nvidia_generations

ROWS = [("kernel_issues", i, row) for i, row in enumerate(kernel_issues.KNOWN_ISSUES)] + \
       [("nvidia_generations", i, row) for i, row in enumerate(nvidia_generations.GENERATIONS_TABLE)]


def sources(row):
    """The row's source fields: "source" and every "<x>_source" whose value it cites (None: nothing to cite)."""
    return {k: v for k, v in row.items() if k == "source" or k.endswith("_source")}


@pytest.mark.parametrize("table,index,row", ROWS, ids=["%s[%d]" % (t, i) for t, i, _ in ROWS])
def test_every_row_cites_a_source(table, index, row):
    cited = sources(row)
    assert cited, "%s row %d has no source field" % (table, index)
    for key, value in cited.items():
        if value is None:  # no source only for a value the row does not claim (no last branch yet, no floor)
            claimed = {"max_source": "max_branch", "min_source": "min_driver"}.get(key)
            assert claimed and row[claimed] is None, "%s row %d: %s is None" % (table, index, key)
            continue
        assert isinstance(value, str) and len(value) > 20, "%s row %d: %s %r cites nothing" % (table, index, key, value)
