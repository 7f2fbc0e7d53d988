"""The JMeter CSV reader's verdicts on distinct column values (HTTP status, success, transaction parent).

Each verdict has a plain-Python form, used when every new value is ASCII (it needs neither
``pyarrow.compute`` nor pandas, whose imports cost more CPU than a short file's parse), and a pyarrow
compute form for the rest.  Here the two are compared on every ASCII character around varied values,
and :func:`jmeter._by_value` over several dictionary chunks (new values arriving in later chunks,
values outside ASCII, repeated values) against a plain row-by-row loop.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from headroom.formats import jmeter

ASCII = [chr(i) for i in range(128)]
BASES = [
    "", "0", "200", "404", "0099", "2000", "20000", "99999", "+200", "-1", "2 0", "2.0", "1e3",
    "true", "TRUE", "True", "false", "tru", "truex", "t rue", "yes", "1",
    "Number of samples in transaction", "Number of samples in transaction : 3, number of failing samples : 0",
    "number of samples in transaction : 3", " Number of samples in transaction : 1",
    "OK", "Non HTTP response code: java.net.ConnectException",
]  # fmt: skip


def _ascii_values() -> list[str]:
    out = list(ASCII)
    for b in BASES:
        out.append(b)
        for c in ASCII:
            out += [c + b, b + c, c + b + c]
    return list(dict.fromkeys(out))


@pytest.mark.parametrize("judge", [jmeter._CODE, jmeter._SUCCESS, jmeter._TCP], ids=["code", "success", "tc"])
def test_python_verdict_equals_arrow_on_ascii(judge):
    by_python, by_arrow = judge
    vals = _ascii_values()
    want = by_arrow(pa.array(vals, pa.string()))
    got = [by_python(v) for v in vals]
    bad = [(v, g, w) for v, g, w in zip(vals, got, want) if g != w or type(g) is not type(w)]
    assert not bad, bad[:10]


def _row_by_row(rows: list[str], judge) -> list:
    """The verdict of each row on its own (the pyarrow form, one value at a time)."""
    return [judge[1](pa.array([v], pa.string()))[0] for v in rows]


CHUNKS = [
    [["200"]],  # one chunk, one value
    [["200", "200", " 404 ", "200"], ["503", "200"], [" 404 ", "abc"]],  # new values in later chunks
    [["true", "false"], ["TRUE ", "true"], ["false"]],
    [["200", "２００", "true"], ["ｔｒｕｅ", "\u00a0200\u00a0", "200"], ["\u2003true\u2003", "\u0130"]],  # not ASCII
    [["Number of samples in transaction : 2, number of failing samples : 0", "OK"],
     ["OK", "Ｎumber of samples in transaction"], ["Number of samples in transaction : 1"]],
    [[], ["200"], []],  # empty chunks
]  # fmt: skip


@pytest.mark.parametrize("chunks", CHUNKS)
@pytest.mark.parametrize(
    "judge,dtype",
    [(jmeter._CODE, np.int64), (jmeter._SUCCESS, bool), (jmeter._TCP, bool)],
    ids=["code", "ok", "tc"],
)
def test_by_value_equals_row_by_row(chunks, judge, dtype):
    dict_type = pa.dictionary(pa.int32(), pa.string())
    col = pa.chunked_array([pa.array(c, pa.string()).dictionary_encode() for c in chunks], type=dict_type)
    memo: dict = {}
    got = jmeter._by_value(col, judge, memo, dtype)
    rows = [v for c in chunks for v in c]
    want = np.array(_row_by_row(rows, judge), dtype)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    # a second pass with the verdicts remembered gives the same
    np.testing.assert_array_equal(jmeter._by_value(col, judge, memo, dtype), want)


def test_by_value_with_a_dictionary_not_all_used():
    """A chunk whose dictionary holds values no row uses, and a chunk sliced out of a longer one."""
    dict_type = pa.dictionary(pa.int32(), pa.string())
    d = pa.array(["200", "x", " 503", "404"], pa.string())
    a = pa.DictionaryArray.from_arrays(pa.array([2, 0, 0, 3, 2], pa.int32()), d)
    col = pa.chunked_array([a.slice(1, 3), a], type=dict_type)
    got = jmeter._by_value(col, jmeter._CODE, {}, np.int64)
    np.testing.assert_array_equal(got, [200, 200, 404, 503, 200, 200, 404, 503])


def test_scanning_a_jmeter_csv_imports_neither_pandas_nor_pyarrow_compute(tmp_path):
    """The ASCII path keeps a fresh process from importing pandas or pyarrow.compute (speed only)."""
    p = tmp_path / "r.csv"
    rows = ["timeStamp,elapsed,label,responseCode,responseMessage,threadName,success,allThreads"]
    for i in range(200):
        lvl = 1 + i // 50
        rows.append(
            f"{1700000000000 + i * 10},{i % 7},home,{200 if i % 9 else 503},OK,t 1-1,{str(i % 9 > 0).lower()},{lvl}"
        )
    p.write_text("\n".join(rows) + "\n")
    code = (
        "import sys; sys.path.insert(0, sys.argv[2]); from headroom.formats import jmeter; "
        "n = sum(len(b) for b in jmeter.scan_csv(sys.argv[1]).batches()); "
        "print(jmeter.__file__, n, 'pandas' in sys.modules, 'pyarrow.compute' in sys.modules)"
    )
    root = str(Path(jmeter.__file__).parents[2])  # the headroom this test imported, not an installed one
    out = subprocess.run(
        [sys.executable, "-c", code, str(p), root], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == [jmeter.__file__, "200", "False", "False"]
