"""The compiled program's revision: which optional fields the hlsnn that wrote it knew.

The container's ``version`` (:data:`hlsnn.network.artifact.VERSION`) changes only when an old
reader cannot read a new file; the package version (the program's ``hlsnn``) did not change as
rules were added. A rule that stores a new optional field in the program (a field whose absence
an older program means "not needed") raises :data:`REVISION` and names the field in
:data:`ADDED`; the program records ``revision`` (a program without it is revision 1). A load that
finds a needed field missing asks :func:`older` whether the writer predates that field, and then
says so, with what to do, instead of the rule's own message."""
from __future__ import annotations

#: the revision this hlsnn writes
REVISION = 8
#: revision -> the optional fields it added: ``{field: what it holds}``
ADDED = {
    2: {"gate_in": "rule gate_in's code radix of a gate's operand that is itself a gate's product"},
    3: {"gate_in of an Add or GlobalAveragePool": "rule gate_in_sum's code radix of a residual Add's or a global pool's "
                                                  "operand that is a gate's product"},
    4: {"gate_in of an AveragePool": "rule gate_in_sum's code radix of an average pool's operand that is a gate's product",
        "table of a PRelu per channel": "rule channel_table's calibrated output radix of a PRelu with one slope per channel"},
    5: {"LayerNormalization in integers": "rule layer_norm (hlsnn.engines.network.tokens.layernorm): a LayerNormalization of a "
                                          "fixed-point tensor before an engine layer runs in integers, its "
                                          "self-check pairs made so (before: float64 on the host)"},
    6: {"lnorm_in": "rule layer_norm_sum's calibrated radix of the residual sum a LayerNormalization reads (the layer path "
                    "converts the sum to codes there, then runs rule layer_norm; before: float64 on the host)"},
    7: {"codes": "attention's rules add_const, act_matmul, int_softmax and layer_norm_codes (hlsnn.engines.network.tokens.attention): a position embedding, a MatMul "
                 "of two activations, a Softmax and a LayerNormalization in a fixed8 attention network run in "
                 "integers, the calibrated output radix of their codes (before: float64 on the host)"},
    8: {"pair_in": "attention on BFP pairs (hlsnn.engines.bfp_systolic.network.attnpairs rules bfp_pair_codes, bfp_scale, bfp_add_const, bfp_softmax, "
                   "bfp_layer_norm): in a bfp attention network the Scale of q and k, a position embedding, a Softmax and a "
                   "LayerNormalization run in integers, the calibrated radix at which their input pairs become "
                   "codes (before: float64 on the host)"},
}
#: the first revision whose layer path runs rule layer_norm (an older program keeps float64 there)
LAYERNORM = 5
#: the first revision whose layer path runs rule layer_norm_sum (a LayerNormalization of a residual sum)
LAYERNORM_SUM = 6
#: the first revision whose layer path runs attention's rules (hlsnn.engines.network.tokens.attention.REVISION)
ATTENTION = 7
#: the first revision whose layer path runs attention's rules on BFP pairs
#: (hlsnn.engines.bfp_systolic.network.attnpairs.REVISION)
ATTENTION_PAIRS = 8


def of(program):
    """The revision of a compiled ``program`` (a dict): its ``revision``, 1 when absent."""
    return int(program.get("revision", 1))


def older(origin, field):
    """The message for a load that needs ``field`` and does not find it, when the program was
    written before ``field`` existed (``origin``: the loader's ``{"revision", "hlsnn", "model",
    "assignment"}``), else None (the field is missing for another reason)."""
    if not origin:
        return None
    added = next((r for r, fields in ADDED.items() if field in fields), None)
    if added is None or origin.get("revision", 1) >= added:
        return None
    model, asg = origin.get("model") or "MODEL", origin.get("assignment") or "A"
    return (f"the compiled model was made by an older hlsnn (hlsnn {origin.get('hlsnn', '?')}, program revision "
            f"{origin.get('revision', 1)}) without {field} ({ADDED[added][field]}, revision {added}); recompile it "
            f"with this hlsnn: `hlsnn compile {model}.yaml --assignment {asg} -o NAME.hlsnn`")
