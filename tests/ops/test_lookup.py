"""EMBEDDING_LOOKUP and HASHTABLE_LOOKUP: misses, bounds, and hit flags."""
import numpy as np

from nngpu.hal.types import ErrorStatus
from nngpu.hal.types import OperandType as T
from nngpu.hal.types import OperationType as Op
from nngpu.testing import output, run_op, tensor

F32, I32, Q8 = T.TENSOR_FLOAT32, T.TENSOR_INT32, T.TENSOR_QUANT8_ASYMM


def test_embedding_lookup_rows_and_repeats():
    values = np.arange(12, dtype=np.int32).reshape(4, 3)
    lookups = np.array([3, 0, 3], dtype=np.int32)
    r = run_op(Op.EMBEDDING_LOOKUP, [tensor(I32, lookups), tensor(I32, values, const=True)], [output(I32, [3, 3])])
    assert r.status == ErrorStatus.NONE
    assert r.outputs[0].tolist() == [values[k].tolist() for k in lookups]


def test_embedding_lookup_out_of_range_fails():
    values = np.ones((4, 3), dtype=np.float32)
    for bad in ([4], [-1]):
        r = run_op(Op.EMBEDDING_LOOKUP, [tensor(I32, bad), tensor(F32, values, const=True)], [output(F32, [1, 3])])
        assert r.status in (ErrorStatus.INVALID_ARGUMENT, ErrorStatus.GENERAL_FAILURE)


def test_hashtable_lookup_miss_gives_zero_row_and_hit_flags():
    keys = np.array([-5, 2, 9, 40], dtype=np.int32)
    values = np.arange(1, 9, dtype=np.uint8).reshape(4, 2)
    lookups = np.array([9, 3, -5, 41, -6], dtype=np.int32)
    r = run_op(Op.HASHTABLE_LOOKUP, [tensor(I32, lookups), tensor(I32, keys, const=True),
                                     tensor(Q8, values, 0.5, 7, const=True)],
               [output(Q8, [5, 2], 0.5, 7), output(Q8, [5], 1.0, 0)])
    assert r.status == ErrorStatus.NONE
    out, hits = r.outputs
    table = dict(zip(keys.tolist(), values.tolist()))
    assert hits.tolist() == [int(k in table) for k in lookups]
    assert out.tolist() == [table.get(k, [0, 0]) for k in lookups]


def test_hashtable_lookup_key_count_mismatch_fails():
    r = run_op(Op.HASHTABLE_LOOKUP, [tensor(I32, [1]), tensor(I32, [1, 2, 3], const=True),
                                     tensor(F32, np.ones((2, 2), np.float32), const=True)],
               [output(F32, [1, 2]), output(Q8, [1], 1.0, 0)])
    assert r.status in (ErrorStatus.INVALID_ARGUMENT, ErrorStatus.GENERAL_FAILURE)
