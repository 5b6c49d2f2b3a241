"""The ASTRA-sim 1.0 workload reader: every type's header, layers, and one sentence per bad line."""

import pytest

from testbed.core.errors import FabricLabError
from workloads.training.astra_text import parse_workload
from workloads.training.model import ALLREDUCE, ALLTOALL, Comm

DATA_TEXT = """DATA
2
conv1\t-1\t100\tNONE\t0\t50\tNONE\t0\t70\tALLREDUCE\t4096\t5
fc\t-1\t10 NONE 0 20 NONE 0 30 NONE 0 1
"""


def test_data_workload_layers():
    w = parse_workload(DATA_TEXT, "w.txt")
    assert w.kind == "DATA" and [layer.name for layer in w.layers] == ["conv1", "fc"]
    first = w.layers[0]
    assert (first.fwd_cycles, first.ig_cycles, first.wg_cycles, first.update_cycles) == (
        100, 50, 70, 5)
    assert first.wg_comm == Comm(ALLREDUCE, 4096) and not first.fwd_comm.active


def test_transformer_and_dlrm_headers():
    layer = "l -1 1 ALLREDUCE 8 1 ALLGATHER 4 1 ALLREDUCE 16 1\n"
    w = parse_workload("HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 8 "
                       "checkpoints: 1 0 checkpoint_initiates: 1 2\n3\n" + layer * 3, "t.txt")
    assert (w.model_parallel_group, w.checkpoints, w.recompute_from) == (8, {0}, {2})
    d = parse_workload("HYBRID_DLRM 1\n3\n" + "e -1 1 ALLTOALL 8 1 ALLTOALL 8 1 ALLREDUCE 8 1\n"
                       + layer * 2, "d.txt")
    assert d.last_bottom_layer == 1 and d.layers[0].fwd_comm.kind == ALLTOALL


@pytest.mark.parametrize("text, where, words", [
    ("DATA\n1\nconv -1 10 NONE 0 5 NONE 0 7 ALLREDUCE many 1\n", "w.txt line 3", "many"),
    ("DATA\n1\nconv -1 10 NONE 0 5 NONE 0 7 BROADCAST 8 1\n", "w.txt line 3", "BROADCAST"),
    ("DATA\n2\nconv -1 10 NONE 0 5 NONE 0 7 NONE 0 1\n", "w.txt line 3", "ends"),
    ("MODEL\n1\n", "w.txt line 1", "not replayed"),
    ("SOMETHING\n1\n", "w.txt line 1", "not an ASTRA-sim"),
    ("DATA\n1\nconv -1 10 NONE 0 5 NONE 0 7 NONE 0 1\nextra\n", "w.txt line 4", "more"),
    ("HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 checkpoints: 1 5 "
     "checkpoint_initiates: 0\n1\nl -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n", "w.txt line 1", "layer 5"),
])
def test_bad_line_is_one_sentence_naming_file_and_line(text, where, words):
    with pytest.raises(FabricLabError) as err:
        parse_workload(text, "w.txt")
    message = str(err.value)
    assert message.startswith(where) and words in message and "\n" not in message
