"""The network mode's integer rules, one entry each, by name.

Every op the network mode runs on the fabric follows an integer rule that gives the layer
path's bits; the rule is stated once, in the docstring of the function that computes it, and
named here. A :class:`Rule` ties that name to the ONNX op(s) it serves, the emulator or
lowering function that *is* the rule (:attr:`Rule.emulator`, a dotted path), the kernel loop
that runs it on each engine (:attr:`Rule.kernels`: a loop label of
``hls/engines/<engine>/network*.j2``, or a tuple of them where a rule runs in more than one loop:
a residual Add fused into its conv's epilogue or write path), the tests that fail when the rule changes
(:attr:`Rule.tests`, pytest node ids) and, where the compiled emu fast path
(:mod:`hlsnn.deploy.run.fast`) writes the rule a second time instead of calling the emulator
function, that twin (:attr:`Rule.twin`). ``docs/network-rules.md`` is generated from
:data:`RULES` (the ``hlsnn-network-rules`` directive of ``docs/_ext/hlsnn_docs.py``) and
``tests/engines/test_network_rules.py`` holds every entry true.

:attr:`Rule.code` is the rule's former number-and-letter code (``"10c"``), which the docs and
the changelog of before use; :attr:`Rule.scope` says whose numbered list it came from
(``netmode``: :mod:`hlsnn.deploy.lower.program` and the modules of ``engines/network``;
``netmove``: :mod:`hlsnn.engines.network.move`'s data moves, whose ``9`` and ``14`` are not
:mod:`hlsnn.engines.network.gate`'s and :mod:`hlsnn.engines.network.pools.cornerresize`'s; ``netbfp``: the ``bfp_systolic`` network mode,
:mod:`hlsnn.engines.bfp_systolic.network.lower`, on ``(mantissa, exponent)`` pairs).
"""
from __future__ import annotations

from dataclasses import dataclass, field

#: the engines with a network kernel, in the table's column order
ENGINES = ("shift_mac", "sparse_cluster", "bfp_systolic")

_S, _C, _B = ENGINES


@dataclass(frozen=True)
class Rule:
    """One integer rule of the network mode (module docstring)."""
    name: str                       # snake_case, unique: how docs and docstrings name the rule
    code: str                       # the former code ("10c"); "" for a rule that never had one
    scope: str                      # "netmode", "netmove" or "netbfp" (module docstring)
    ops: tuple                      # the ONNX / hlsnn host ops it serves
    emulator: str                   # dotted path of the function that computes the rule
    kernels: dict                   # {engine: loop label (or a tuple of them) of its network*.j2}
    tests: tuple                    # pytest node ids that fail when the rule changes
    summary: str                    # one line: what the rule does
    twin: str = ""                  # a second writing of the rule (the fast path's), if any
    extra: dict = field(default_factory=dict)


def _k(loop, engines=(_S, _C)):
    return {e: loop for e in engines}


_ALL = (_S, _C, _B)
_T = "tests/deploy/"

RULES = (
    # ---- the integer network mode (shift_mac, sparse_cluster): hlsnn.deploy.lower.program
    Rule("input_quantize", "1", "netmode", ("(graph input)",),
         "hlsnn.deploy.lower.program.quantize_input", _k("LoadImage"),
         (_T + "test_network_kernel.py::test_fast_input_quantization_is_to_fixed",
          _T + "test_netfast.py::test_compiled_input_quantization_is_to_fixed"),
         "the float input as to_fixed integers at the first engine layer's radix, on the host",
         twin="native/netint.c hlsnn_net_quantize; native/netin.c (the C host path)"),
    Rule("input_view", "1v", "netmode", ("Unsqueeze", "Reshape"),
         "hlsnn.engines.network.inview.take", _k("LoadImage", _ALL),
         (_T + "test_network_sixth.py::test_flat_input_read_as_one_channel_takes_the_convs_view",),
         "a first conv reading the input through a view makes that view the kernel's input shape"),
    Rule("conv_output", "2", "netmode", ("Conv", "Gemm", "MatMul", "Clip"),
         "hlsnn.deploy.lower.program.conv_ints", {_S: "ConvTaps", _C: "NetMac"},
         (_T + "test_network_kernel.py::test_conv_rule_against_plain_python",
          _T + "test_network_depthwise.py::test_depthwise_conv_rule_with_a_clamp_against_plain_python"),
         "exact accumulators, the engine's output rule, a ReLU6 as the conv's output clamp",
         twin="native/netint.c hlsnn_net_conv, hlsnn_net_dwconv, hlsnn_net_conv16"),
    Rule("max_pool", "3", "netmode", ("MaxPool", "GlobalMaxPool"),
         "hlsnn.deploy.lower.program.maxpool_ints", _k("MaxPoolTaps"),
         (_T + "test_network_prefix.py::test_ceil_mode_maxpool_is_more_end_padding",),
         "the largest integer of each window (padding never wins); ceil_mode as more end padding",
         twin="native/netint.c hlsnn_net_maxpool"),
    Rule("input_max_pool", "3i", "netmode", ("MaxPool",),
         "hlsnn.engines.network.pools.inputpool.lower_host", _k("MaxPoolTaps", _ALL),
         (_T + "test_network_sixth.py::test_inception_max_pool_of_the_input_and_the_concat_chain",),
         "a max pool of the float input another layer reads too, on the input's integers"),
    Rule("residual_add", "4", "netmode", ("Add", "Relu", "GlobalAveragePool", "ReduceMean"),
         "hlsnn.deploy.lower.program.add_ints", {_S: "AddPixels", _C: ("AddPixels", "NetMac")},   # NetMac: fuseadd
         (_T + "test_network_kernel.py::test_add_rule_equals_the_float_host_glue",
          _T + "test_netcal.py::test_the_run_paths_add_is_rule_4",
          _T + "test_lowbit_pack.py::test_the_4_bit_kernel_on_csim_and_the_sim_board"),      # fused in NetMac
         "aligned exact sum, ReLU, power-of-two global pool, requantized to the consumer's radix",
         twin="native/netint.c hlsnn_net_add"),
    Rule("chained_add", "4b", "netmode", ("Add",),
         "hlsnn.engines.network.joins.chain.materialize_sum", _k("AddPixels", _ALL),
         (_T + "test_network_tc_a.py::test_the_chained_sum_is_the_layer_paths_float_sum",),
         "an Add operand that is another Add's sum is that sum exactly, not requantized"),
    Rule("channel_reduce", "4c", "netmode", ("ReduceMean", "ReduceMax"),
         "hlsnn.engines.network.pools.reduce._over_channels", _k("MaxPoolTaps", _ALL),
         (_T + "test_cbam_spatial.py::test_channel_mean_and_max_ops_are_the_exact_values_rounded_once",
          _T + "test_cbam_spatial.py::test_channel_mean_and_max_on_bfp_pairs_are_the_exact_values"),
         "a mean or max over the channels: a transpose, a pool per pixel, a transpose back",
         extra={"pairs": "hlsnn.engines.bfp_systolic.network.reduce.over_channels"}),
    Rule("add_clip", "4q", "netmode", ("Clip", "Quant"),
         "hlsnn.engines.network.joins.addclip.fields", {_C: ("AddPixels", "NetMac")},
         (_T + "test_lowbit_pack.py::test_a_clip_after_an_add_is_taken_only_for_engine_readers",
          _T + "test_lowbit_pack.py::test_the_w4a4_resnet_is_qonnx_bit_for_bit_in_one_start_on_both_kernels",
          _T + "test_lowbit_pack.py::test_the_4_bit_kernel_on_csim_and_the_sim_board"),   # fused in NetMac (fuseadd)
         "a low-bit clamp after a residual Add as the Add's output clamp at the consumer's radix"),
    Rule("residual_codes", "4r", "netmode", ("Add",),
         "hlsnn.engines.network.tokens.attention.lower_host", _k("AddPixels"),
         (_T + "test_network_attention.py::test_attention_models_lower_to_one_program_with_the_layer_paths_bits",),
         "in an attention network, a residual Add of two code tensors is requantized to codes at once"),
    Rule("token_max", "4t", "netmode", ("ReduceMax",),
         "hlsnn.engines.network.pools.reduce._max_over_tokens", _k("MaxPoolTaps"),
         (_T + "test_network_max_tokens.py::test_a_max_over_tokens_runs_in_one_start_with_the_layer_paths_bits",),
         "a max over the tokens of (T, F) rows as a max pool of the map they come from"),
    Rule("net_output", "5", "netmode", ("(graph output)", "Softmax"),
         "hlsnn.deploy.lower.program.finish", _k("StoreOutput"),
         (_T + "test_network_views_after.py::test_views_after_the_logits_are_one_reshape_of_the_same_values",
          _T + "test_network_kernel.py::test_network_mode_equals_the_layer_by_layer_emulator"),
         "the last engine layer's integers dequantized; the host layers after them in float64"),
    Rule("late_max_pool", "", "netmode", ("MaxPool", "GlobalMaxPool", "ReduceMax"),
         "hlsnn.engines.network.joins.maxlate.lower_host", _k("MaxPoolTaps"),
         (_T + "test_network_maxlate.py::test_a_max_pool_of_a_pending_add_or_gate_runs_in_the_network_mode_with_the_layer_paths_bits",),
         "a max pool of a pending Add, gate or concat: requantized first (monotone), then pooled"),
    # ---- data moves: hlsnn.engines.network.move (rules of its own numbered list)
    Rule("nearest_upsample", "6", "netmove", ("Upsample", "Resize"),
         "hlsnn.engines.network.move.run", _k("MovePixels", _ALL),
         (_T + "test_network_move.py::test_moves_equal_loops_written_from_their_definitions",),
         "a nearest upsample by integer factors (an edge upsample for the bilinear rules)",
         twin="hlsnn.deploy.run.fast.FastNet._move (NHWC)"),
    Rule("add_upsample", "6a", "netmode", ("Upsample", "ZeroStuff"),
         "hlsnn.engines.network.joins.addmove.lower_host", _k("MovePixels", _ALL),
         (_T + "test_network_addmove.py::test_the_upsample_of_a_pending_add_is_the_layer_paths_sum_moved_and_rounded_once",),
         "a move of a pending Add: the Add requantized to the consumer's radix, then moved"),
    Rule("add_zerostuff", "6z", "netmode", ("ZeroStuff",),
         "hlsnn.engines.network.joins.addmove.lower_host", _k("MovePixels", _ALL),
         (_T + "test_network_addcat.py::test_the_zerostuff_and_the_concat_are_the_layer_paths_sums_rounded_once",),
         "a transposed conv's zero stuffing of a pending Add, as add_upsample"),
    Rule("zero_stuff", "7", "netmove", ("ZeroStuff", "ConvTranspose"),
         "hlsnn.engines.network.move.run", _k("MovePixels", _ALL),
         (_T + "test_network_move.py::test_moves_equal_loops_written_from_their_definitions",),
         "a transposed conv's input: s - 1 zeros between the pixels",
         twin="hlsnn.deploy.run.fast.FastNet._move (NHWC)"),
    Rule("channel_concat", "8", "netmove", ("Concat",),
         "hlsnn.engines.network.move.run", _k("ConcatPixels", _ALL),
         (_T + "test_network_move.py::test_moves_equal_loops_written_from_their_definitions",),
         "a channel concat, each part requantized to the consumer's radix as it moves",
         twin="hlsnn.deploy.run.fast.FastNet._move (NHWC)"),
    Rule("add_concat", "8a", "netmode", ("Concat",),
         "hlsnn.engines.network.joins.addcat.lower_host", _k("ConcatPixels", _ALL),
         (_T + "test_network_addcat.py::test_the_zerostuff_and_the_concat_are_the_layer_paths_sums_rounded_once",),
         "a concat part that is a pending Add: the Add at the concat's readers' radix"),
    Rule("input_concat", "8i", "netmove", ("Concat",),
         "hlsnn.engines.network.joins.catinput.check_radix", _k("ConcatPixels", _ALL),
         (_T + "test_network_catinput.py::test_a_skip_from_the_input_at_another_radix_is_refused_by_name",
          _T + "test_network_catinput.py::test_skip_from_the_input_and_the_one_row_pool_run_in_the_emu_network_mode"),
         "a concat part that is the graph input: its integers as the image load wrote them"),
    Rule("concat_chain", "8k", "netmove", ("Concat",),
         "hlsnn.engines.network.joins.catsplit.split", _k("ConcatPixels", _ALL),
         (_T + "test_network_sixth.py::test_inception_max_pool_of_the_input_and_the_concat_chain",),
         "a concat of more than two parts as a chain of concats of two"),
    Rule("mixed_concat", "8m", "netmode", ("GlobalAveragePool", "Mul"),
         "hlsnn.engines.network.joins.catmix.shifts_by_channel", {_S: "AddPixels", _C: "AddPixels"},
         (_T + "test_network_catmix.py::test_the_pool_and_the_gate_are_the_layer_paths_float_values_rounded_once",),
         "a pool or gate of a concat at two radix points: a pre-shift per channel range"),
    Rule("rows_transpose", "9", "netmove", ("RowsToMap", "MapToRows", "Transpose"),
         "hlsnn.engines.network.tokens.transpose.run", _k("TransposeDiagonals", _ALL),
         (_T + "test_network_transpose.py::test_transpose_equals_loops_written_from_its_definition",),
         "rows and channels swapped: y[s, r] = q[r, s], radix (or pair) unchanged"),
    Rule("edge_pad", "14", "netmove", ("Pad",),
         "hlsnn.engines.network.move.pad_index", _k("MovePixels", _ALL),
         (_T + "test_network_pad.py::test_the_pad_rule_is_onnx_pad_of_the_codes",),
         "a reflect or edge pad of the height and width: every output one input's integer",
         twin="hlsnn.deploy.run.fast.FastNet._move (NHWC, calls pad_index)"),
    Rule("step_pick", "14p", "netmove", ("Gather",),
         "hlsnn.engines.network.tokens.pick.fields", _k("MovePixels", _ALL),
         (_T + "test_network_pick.py::test_a_pick_is_a_one_step_reflect_crop_equal_to_numpys_take",),
         "a pick of one step as a reflect pad that crops to it"),
    # ---- tables and gates: hlsnn.engines.network.gate and its extensions
    Rule("unary_table", "9", "netmode", ("HardSwish", "Sigmoid", "Tanh", "Gelu", "LeakyRelu", "UnaryChain"),
         "hlsnn.engines.network.gate.table", _k("LutPixels"),
         (_T + "test_network_gate.py::test_tables_equal_the_definitions",
          _T + "test_network_tables2.py::test_rational_tables_are_the_exact_values_rounded"),
         "a unary op on b-bit codes as a table of its 2**b codes, rounded exactly",
         twin="hlsnn.deploy.run.fast.FastNet._slice (the lookup inline)"),
    Rule("channel_table", "9ch", "netmode", ("PRelu",),
         "hlsnn.engines.network.gate.channel_table", _k("LutPixels"),
         (_T + "test_network_prelu_channel.py::test_table_per_channel_is_the_exact_value_rounded_once",),
         "a PRelu with one slope per channel as a table per channel"),
    Rule("table_in", "9e", "netmode", ("Sigmoid", "HardSwish", "LeakyRelu"),
         "hlsnn.engines.network.tablein.lower_host", _k("LutPixels"),
         (_T + "test_network_tablein.py::test_rule_9e_codes_are_the_ops_float_values_rounded_at_the_calibrated_radix",),
         "a table of a sum, product or mean: its exact values as codes at a calibrated radix first",
         extra={"layer": "hlsnn.deploy.run.tablecodes.run"}),
    Rule("channel_gate", "10", "netmode", ("Mul",),
         "hlsnn.engines.network.gate.gate_ints", _k("GatePixels"),
         (_T + "test_network_gate.py::test_gate_rule_is_the_product_requantized",
          _T + "test_network_mulmap.py::test_map_product_is_the_exact_product_requantized"),
         "a map times a C-vector (or a map) exactly, requantized to the consumer's radix"),
    Rule("gate_in", "10c", "netmode", ("Mul",),
         "hlsnn.engines.network.gatein.lower_operands", _k("GatePixels", _ALL),
         (_T + "test_network_cbam.py::test_a_gate_of_a_gates_product_takes_its_codes_first",
          _T + "test_network_cbam.py::test_rule_10c_at_another_radix_than_the_convs"),
         "a gate of a gate's product: the inner product as codes at a calibrated radix first",
         extra={"layer": "hlsnn.deploy.run.gatecodes.run",
                "pairs": "hlsnn.engines.network.gatein.bfp_operands"}),
    Rule("gate_in_sum", "10d", "netmode", ("Add", "GlobalAveragePool", "AveragePool"),
         "hlsnn.engines.network.gatein.lower_pending", _k("AddPixels"),
         (_T + "test_network_gate_avgpool.py::test_layer_path_pools_the_products_codes",
          _T + "test_network_glu.py::test_a_glu_residual_and_a_pool_of_a_glu_run_in_the_network_mode"),
         "a sum or pool of a gate's product: the product as codes at a calibrated radix first"),
    Rule("gate_concat", "10k", "netmode", ("Concat",),
         "hlsnn.engines.network.joins.gatecat.lower_host", _k("ConcatPixels"),
         (_T + "test_network_gatecat.py::test_the_concat_is_the_layer_paths_float_concat_rounded_once_at_the_convs_radix",),
         "a concat part that is a pending gate: the gate at the concat's readers' radix"),
    Rule("gate_pool", "10m", "netmode", ("MaxPool", "GlobalMaxPool", "Upsample", "ZeroStuff"),
         "hlsnn.engines.network.pools.gatepool.lower", _k("MaxPoolTaps"),
         (_T + "test_network_gatepool.py::test_a_pool_and_an_upsample_of_a_silu_run_in_one_start",),
         "a max pool or move of a gate's product: the gate at the readers' radix, then the pool"),
    Rule("spatial_gate", "10p", "netmode", ("Mul",),
         "hlsnn.engines.network.gate.gate_ints", _k("GatePixels", _ALL),
         (_T + "test_network_mulmap.py::test_a_spatial_gate_runs_on_integers_and_on_pairs",),
         "a map times a 1 x H x W map broadcast over the channels (CBAM, scSE)"),
    # ---- pools and resizes: linpool, mean, uncounted, linwide, lintwo, cornerresize
    Rule("avg_pool", "11", "netmode", ("AveragePool",),
         "hlsnn.engines.network.pools.linpool.run", _k("MaxPoolTaps", _ALL),
         (_T + "test_network_linpool.py::test_avgpool_rule_equals_onnx_reference_rounded_to_the_consumer",
          _T + "test_network_linpool.py::test_pairs_rules_equal_onnx_reference_exactly"),
         "a 2**p-tap average pool: the window's exact sum, requantized",
         twin="hlsnn.deploy.run.fast.FastNet._move (NHWC window sums)"),
    Rule("avg_pool_global", "11g", "netmode", ("AveragePool",),
         "hlsnn.engines.network.pools.linpool.covers_map", _k("AddPixels", _ALL),
         (_T + "test_network_catinput.py::test_covers_map_is_one_window_over_the_map",),
         "an AveragePool whose window is the whole map as a global pool"),
    Rule("avg_pool_uncounted", "11u", "netmode", ("AveragePool",),
         "hlsnn.engines.network.pools.uncounted.scale", _k("MaxPoolTaps", _ALL),
         (_T + "test_network_uncounted.py::test_rule_equals_onnx_reference_quantized_by_the_layer_path",
          _T + "test_network_uncounted.py::test_counts_are_the_taps_inside_the_map"),
         "count_include_pad=0: each window's sum scaled to a sum over L values, then mean_divide"),
    Rule("bilinear_x2", "12", "netmode", ("Resize",),
         "hlsnn.engines.network.pools.linpool.half_pixel_x2", _k("MaxPoolTaps", _ALL),
         (_T + "test_network_linpool.py::test_bilinear_rule_equals_onnx_resize_rounded_to_the_consumer",),
         "a half_pixel linear resize by 2: an edge upsample, then a [1, 2, 1] / 4 window"),
    Rule("add_resize_pairs", "12a", "netmode", ("Resize", "AveragePool"),
         "hlsnn.engines.network.joins.addmove.lower_host", {_B: "MaxPoolTaps"},
         (_T + "test_network_addmove.py::test_the_linear_resize_of_a_pending_add_on_bfp_pairs_is_onnxs_resize_of_the_sum",),
         "a linear resize or average pool of a pending Add on BFP pairs: the exact pairs resized"),
    Rule("bilinear_pow2", "12b", "netmode", ("Resize",),
         "hlsnn.engines.network.pools.linpool.lower_half_pixel", _k("MaxPoolTaps", _ALL),
         (_T + "test_network_bilinear4.py::test_rule_12b_equals_onnx_resize_rounded_to_the_consumer",
          _T + "test_network_bilinear4.py::test_rule_12b_on_pairs_is_onnxs_exact_value"),
         "a half_pixel linear resize by 4 or 8: nearest upsample, edge pad, a [1, 2, ..., 2, 1] window"),
    Rule("two_term_input", "12t", "netmode", ("Conv",),
         "hlsnn.engines.network.lintwo.two_terms", {_C: "NetMac"},
         (_T + "test_network_lintwo.py::test_the_terms_are_twoins_terms_of_the_wide_sum",),
         "a conv's input in two int8 terms taken from the wide sum, one conv summing both"),
    Rule("linear_wide", "12w", "netmode", ("Resize",),
         "hlsnn.engines.network.joins.linwide.run", _k("LinWidePixels"),
         (_T + "test_network_linwide.py::test_resize4_is_four_times_onnxs_linear_resize",
          _T + "test_network_linwide.py::test_the_resized_sum_is_onnxs_resize_rounded_once"),
         "a linear x2 resize of an Add's exact sum kept wide, requantized once"),
    Rule("mean_divide", "13", "netmode", ("GlobalAveragePool", "AveragePool", "ReduceMean"),
         "hlsnn.engines.network.pools.mean.divide", _k("MaxPoolTaps"),
         (_T + "test_network_mean_any.py::test_the_reciprocal_divides_exactly_every_sum_in_range",
          _T + "test_network_mean_any.py::test_the_rule_is_the_exact_quotient_rounded_once"),
         "a mean over a count not a power of two: the exact sum times a constant reciprocal"),
    Rule("box_resize", "14", "netmode", ("Resize",),
         "hlsnn.engines.network.pools.cornerresize.box", _k("MaxPoolTaps"),
         (_T + "test_network_cornerresize.py::test_align_corners_weights_are_torchs_and_a_box_over_a_nearest_upsample",
          _T + "test_network_cornerresize.py::test_rule_and_layer_path_round_the_exact_rational"),
         "an align_corners linear resize: a nearest upsample, a box sum, one division"),
    # ---- LayerNormalization and attention
    Rule("layer_norm", "15", "netmode", ("LayerNormalization",),
         "hlsnn.engines.network.tokens.layernorm.normalized", {_S: "LnSums", _C: "LnSums"},
         (_T + "test_network_layernorm.py::test_rule_is_within_its_stated_error_of_float",
          _T + "test_network_layernorm.py::test_rsqrt_table_rounds_the_reciprocal_square_root"),
         "an integer LayerNormalization over the channels of each position"),
    Rule("layer_norm_codes", "15c", "netmode", ("LayerNormalization",),
         "hlsnn.engines.network.tokens.attention._lnorm_codes", _k("LnOut"),
         (_T + "test_network_attention.py::test_attention_models_lower_to_one_program_with_the_layer_paths_bits",),
         "in an attention network, a LayerNormalization ends in codes for every reader"),
    Rule("layer_norm_sum", "15s", "netmode", ("LayerNormalization", "Add"),
         "hlsnn.engines.network.tokens.layernorm._sum_codes", _k("LnSums"),
         (_T + "test_network_layernorm_sum.py::test_post_norm_mlp_is_one_start_with_the_layer_paths_bits",),
         "a LayerNormalization of a residual sum: the sum as codes at a calibrated radix first",
         extra={"layer": "hlsnn.deploy.run.lnsum.sum_run"}),
    Rule("attn_gather", "16", "netmode", ("SwMove", "Gather", "Transpose", "Reshape"),
         "hlsnn.engines.network.tokens.attention.gather", _k("GatherElems"),
         (_T + "test_network_attention.py::test_gather_patterns_are_the_moves",),
         "a data move of attention as one index pattern, radix unchanged"),
    Rule("class_token", "16k", "netmode", ("Concat",),
         "hlsnn.engines.network.tokens.attention.const_codes", _k("GatherElems"),
         (_T + "test_network_attention.py::test_class_token_codes_are_to_fixed_and_the_concat_pattern",),
         "a concat with constants (a class token) as a gather of constant codes"),
    Rule("add_const", "17", "netmode", ("AddConst",),
         "hlsnn.engines.network.tokens.attention.addc", _k("AddcPixels"),
         (_T + "test_network_attention.py::test_addc_is_to_fixed_of_the_float_sum",
          _T + "test_network_attention.py::test_addc_planted_bit_fails"),
         "a per-element constant (a position embedding) added exactly, requantized"),
    Rule("act_matmul", "18", "netmode", ("MatMulAct",),
         "hlsnn.engines.network.tokens.attention.actmm", _k("AmmMacs"),
         (_T + "test_network_attention.py::test_actmm_exact_against_rationals",
          _T + "test_network_attention.py::test_actmm_planted_bit_fails"),
         "a MatMul of two activations: exact sums requantized",
         twin="hlsnn.deploy.run.attnrun.layer_run (actmm_acc, then its own shift_round_sat)"),
    Rule("int_softmax", "19", "netmode", ("Softmax",),
         "hlsnn.engines.network.tokens.attention.softmax", _k("SmaxRows"),
         (_T + "test_network_attention.py::test_softmax_exact_to_its_steps_and_near_float",
          _T + "test_network_attention.py::test_softmax_planted_bit_fails"),
         "an integer softmax over the keys: an exp table, a sum, a reciprocal"),
    # ---- the bfp_systolic network mode, on (mantissa, exponent) pairs
    Rule("bfp_input", "1", "netbfp", ("(graph input)",),
         "hlsnn.engines.bfp_systolic.network.lower.quantize_input", {_B: "LoadImage"},
         ("tests/deploy/test_network_bfp.py::test_float32_words_decode_to_their_values",
          "tests/deploy/test_network_bfp.py::test_an_input_not_exact_in_float32"),
         "the float input as float32 words decoded to pairs"),
    Rule("bfp_pairs", "2", "netbfp", ("(every activation)",),
         "hlsnn.engines.bfp_systolic.network.lower.run", {_B: "StoreOutput"},
         ("tests/deploy/test_network_bfp.py::test_kernel_words_round_trip",),
         "activations are per-element pairs (m, e), value m * 2**e"),
    Rule("bfp_conv", "3", "netbfp", ("Conv", "Gemm", "MatMul"),
         "hlsnn.engines.bfp_systolic.network.lower.patch_exponent", {_B: "ConvExp"},
         ("tests/deploy/test_network_bfp.py::test_conv_rule_against_the_bfp_quantizer",),
         "a conv's patch: the exponent from its largest leading one, the mantissas rounded to M bits"),
    Rule("bfp_gemm", "4", "netbfp", ("Conv", "Gemm", "MatMul"),
         "hlsnn.engines.bfp_systolic.network.lower.conv_pairs", {_B: "ConvMac"},
         ("tests/deploy/test_network_bfp.py::test_conv_rule_against_the_bfp_quantizer",
          "tests/deploy/test_network_bfp.py::test_an_all_zero_patch_gives_the_bias_in_any_batch"),
         "the engine's GEMM and epilogue per output chunk (the layer emulator's rules)"),
    Rule("bfp_add", "5", "netbfp", ("Add", "Relu"),
         "hlsnn.engines.bfp_systolic.network.lower.add_pairs", {_B: ("AddPixels", "ConvMac")},
         ("tests/deploy/test_network_bfp.py::test_add_rule_equals_float64",
          "tests/deploy/test_network_bfp.py::test_add_refuses_a_sum_the_float_path_rounds_or_the_kernel_cannot_hold",
          "tests/deploy/test_network_bfp_fuse.py::test_the_fused_add_keeps_the_bits"),   # in a conv's write path (.fuse)
         "an exact sum of pairs at the smaller exponent, within the element"),
    Rule("bfp_global_pool", "6", "netbfp", ("GlobalAveragePool", "ReduceMean"),
         "hlsnn.engines.bfp_systolic.network.lower.add_pairs", {_B: "AddPixels"},
         ("tests/deploy/test_network_bfp.py::test_add_rule_equals_float64",),
         "a power-of-two global pool: the exact sum, its exponent less p"),
    Rule("bfp_pool", "7", "netbfp", ("MaxPool", "GlobalMaxPool", "Relu", "AveragePool", "Resize"),
         "hlsnn.engines.bfp_systolic.network.lower.maxpool_pairs", {_B: "MaxPoolTaps"},
         ("tests/deploy/test_network_bfp.py::test_maxpool_rule_picks_the_largest_value",),
         "max pool and ReLU on pairs; the average pools and bilinear x2 on pairs (avg_pool, bilinear_x2)"),
    Rule("bfp_elementwise", "8", "netbfp", ("Sigmoid", "HardSwish", "Clip", "Mul"),
         "hlsnn.engines.bfp_systolic.network.gate.run", {_B: "LutPixels"},
         ("tests/deploy/test_network_bfp_gate.py::test_a_table_and_a_gate_on_a_tiny_graph_against_fractions",),
         "tables, HardSwish, Clip and the gate on pairs (bfp_table, bfp_hardswish, bfp_clip, bfp_gate)"),
    Rule("bfp_output", "9", "netbfp", ("(graph output)",),
         "hlsnn.engines.bfp_systolic.network.lower.dequantize", {_B: "StoreOutput"},
         ("tests/deploy/test_network_bfp.py::test_network_mode_equals_the_layer_by_layer_emulator",),
         "the last engine layer's pairs as float64; the host layers after them"),
    Rule("bfp_round_odd", "4o", "netbfp", ("ReduceMean", "GlobalAveragePool"),
         "hlsnn.engines.bfp_systolic.network.reduce.round_odd", {_B: "AddPoolOdd"},
         (_T + "test_cbam_spatial.py::test_a_channel_mean_rounded_to_odd_gives_the_layer_paths_bits",),
         "a mean read only by convs held rounded to odd at 25 bits"),
    Rule("bfp_mean", "6b", "netbfp", ("GlobalAveragePool", "AveragePool", "ReduceMean"),
         "hlsnn.engines.bfp_systolic.network.anymean.mantissa", {_B: "ConvExp"},
         (_T + "test_network_bfp_mean.py::test_the_rule_is_the_float64_mean_quantized_by_rule_3",
          _T + "test_network_bfp_mean.py::test_the_kernels_reciprocal_divides_every_u_up_to_the_cap"),
         "a mean over a count not a power of two: the reading conv divides by the odd part"),
    Rule("bfp_mean_concat", "6c", "netbfp", ("Concat",),
         "hlsnn.engines.bfp_systolic.network.anymean.scale_parts", {_B: "ConcatPixels"},
         (_T + "test_network_cornerresize.py::test_bfp_convs_reading_two_divisors_are_refused_by_name",),
         "a concat with a mean part: the parts scaled to one divisor"),
    Rule("bfp_table", "9b", "netbfp", ("Sigmoid", "HardSigmoid", "LeakyRelu"),
         "hlsnn.engines.bfp_systolic.network.gate.lut_pairs", {_B: "LutPixels"},
         (_T + "test_network_bfp_gate.py::test_codes_are_the_exact_values_rounded_and_saturated",),
         "a table on pairs: codes at a calibrated radix, then the table rule"),
    Rule("bfp_hardswish", "9c", "netbfp", ("HardSwish",),
         "hlsnn.engines.bfp_systolic.network.gate.hardswish_pairs", {_B: "LutPixels"},
         (_T + "test_network_bfp_gate.py::test_hardswish_on_pairs_is_the_definition_rounded_at_w_bits",),
         "HardSwish exactly on the pair, rounded at w significant bits"),
    Rule("bfp_clip", "9d", "netbfp", ("Clip",),
         "hlsnn.engines.bfp_systolic.network.gate.clip_pairs", {_B: "LutPixels"},
         (_T + "test_network_bfp_clip.py::test_clip_on_pairs_is_the_exact_clip",),
         "Clip(0, hi) on pairs: 0, hi as a pair, or the element itself"),
    Rule("bfp_hardswish_table", "9f", "netbfp", ("HardSwish",),
         "hlsnn.engines.bfp_systolic.network.gate.tabled", {_B: "LutPixels"},
         (_T + "test_network_bfp_hswish_gate.py::test_hardswish_of_a_gate_is_a_table_of_codes_in_both_paths",),
         "HardSwish of a sum or product: bfp_table's table of codes instead"),
    Rule("bfp_wide_codes", "9g", "netbfp", ("Sigmoid", "LeakyRelu", "HardSwish"),
         "hlsnn.engines.bfp_systolic.network.gate.sum_code_bits", {_B: "LutPixels"},
         (_T + "test_network_bfp_sumcodes.py::test_a_leaky_relu_of_a_sum_reads_11_bit_codes_a_sigmoid_of_a_conv_8",),
         "a table of a sum or product reads wider codes (11 bits for bfp8)"),
    Rule("bfp_prelu", "9p", "netbfp", ("PRelu",),
         "hlsnn.engines.bfp_systolic.network.prelu.prelu_pairs", {_B: "LutPixels"},
         (_T + "test_network_bfp_prelu.py::test_the_product_rounded_to_odd_quantizes_as_the_exact_product",),
         "a PRelu per channel on pairs: the product rounded to odd"),
    Rule("bfp_prelu_exact", "9w", "netbfp", ("PRelu",),
         "hlsnn.engines.bfp_systolic.network.prelu.is_wide", {_B: "LutPixels"},
         (_T + "test_network_bfp_prelu.py::test_rule_9w_is_the_exact_product",),
         "a PRelu read by a host op: the exact product in a wide element"),
    Rule("bfp_gate", "10b", "netbfp", ("Mul",),
         "hlsnn.engines.bfp_systolic.network.gate.gate_pairs", {_B: "GatePixels"},
         (_T + "test_network_bfp_gate.py::test_a_table_and_a_gate_on_a_tiny_graph_against_fractions",),
         "a gate on pairs: the exact product, its exponent kept"),
    Rule("bfp_gate_odd", "10r", "netbfp", ("Mul",),
         "hlsnn.engines.bfp_systolic.network.gatero.mark", {_B: "GatePixels"},
         (_T + "test_network_sixth.py::test_rule_10r_patches_round_as_the_exact_products",),
         "a product of two tables' outputs read by convs, held rounded to odd at 25 bits"),
    # ---- attention on BFP pairs: hlsnn.engines.bfp_systolic.network.attnpairs
    Rule("bfp_pair_codes", "20", "netbfp", ("Add", "Softmax", "LayerNormalization"),
         "hlsnn.engines.bfp_systolic.network.gate.codes", {_B: "AddcPixels"},
         (_T + "test_attn_bfp.py::test_codes_of_pairs_are_the_rounded_values",),
         "an op's input pairs as M-bit codes at the radix calibrated on its input (the entry of the rules below)"),
    Rule("bfp_attn_gather", "16b", "netbfp", ("Gather", "Transpose", "Reshape", "Concat"),
         "hlsnn.engines.bfp_systolic.network.attnpairs.run", {_B: "GatherElems"},
         (_T + "test_attn_bfp.py::test_bfp8_attention_lowers_to_one_program_with_the_layer_paths_bits",),
         "a head split or merge (and a class token) as exact moves of pairs"),
    Rule("bfp_scale", "16s", "netbfp", ("Mul", "Div"),
         "hlsnn.engines.bfp_systolic.network.attnpairs.scale_pairs", {_B: "PScalePixels"},
         (_T + "test_attn_bfp.py::test_scale_constant_rounded_to_24_bits_and_exact_product",),
         "q and k times a constant rounded to 24 bits, the product held rounded to odd"),
    Rule("bfp_add_const", "17b", "netbfp", ("Add",),
         "hlsnn.engines.bfp_systolic.network.attnpairs.addc_pairs", {_B: "AddcPixels"},
         (_T + "test_attn_bfp.py::test_addc_pairs_is_to_fixed_of_the_codes_sum_and_planted_bit",),
         "a position embedding: rule add_const on the pairs' codes"),
    Rule("bfp_act_matmul", "18b", "netbfp", ("MatMul",),
         "hlsnn.engines.bfp_systolic.network.attnpairs.actmm_pairs", {_B: "AmmBlocks"},
         (_T + "test_attn_bfp.py::test_actmm_pairs_against_fractions_and_the_layer_paths_engine",
          _T + "test_attn_bfp.py::test_actmm_pairs_near_float_and_planted_bit"),
         "a MatMul of two BFP activations as the engine's GEMM, a block a row of A and a column of B"),
    Rule("bfp_softmax", "19b", "netbfp", ("Softmax",),
         "hlsnn.engines.bfp_systolic.network.attnpairs.softmax_pairs", {_B: "SmaxRows"},
         (_T + "test_attn_bfp.py::test_softmax_pairs_exact_steps_near_float_and_planted_bit",),
         "rule int_softmax on the pairs' codes"),
    Rule("bfp_layer_norm", "15b", "netbfp", ("LayerNormalization",),
         "hlsnn.engines.bfp_systolic.network.attnpairs.lnorm_pairs", {_B: "PlnRows"},
         (_T + "test_attn_bfp.py::test_lnorm_pairs_near_float_of_its_codes_and_planted_bit",),
         "rule layer_norm on the pairs' codes, rounded to M bits at the calibrated radix"),
    Rule("bfp_gate_wide", "10w", "netbfp", ("Mul",),
         "hlsnn.engines.bfp_systolic.network.gatero.wide", {_B: "GatePixels"},
         (_T + "test_rnnunroll.py::test_the_lstm_cell_takes_wide_elements_in_bfp8_and_fails_without",),
         "a product of two tables' outputs read by an Add (an LSTM's i*g): 53-bit elements, the cell sum exact"),
)

#: {name: Rule}
BY_NAME = {r.name: r for r in RULES}


def by_code(code, scope=None):
    """The rules whose former code is ``code`` (in ``scope`` if given): more than one where two
    numbered lists used the same number (``"9"``: ``unary_table`` and ``rows_transpose``)."""
    return [r for r in RULES if r.code == code and (scope is None or r.scope == scope)]


def resolve(dotted):
    """The object a dotted path names (a module attribute, or a class attribute one level down)."""
    import importlib
    parts = dotted.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for p in parts[i:]:
            obj = getattr(obj, p)
        return obj
    raise ImportError(f"no module in {dotted!r}")


def loops(rule, engine):
    """The loop labels that run ``rule`` on ``engine`` (a tuple; empty where it does not run there)."""
    v = rule.kernels.get(engine, ())
    return (v,) if isinstance(v, str) else tuple(v)


def table_rows():
    """The docs table: ``(op, name, emulator, shift_mac, sparse_cluster, bfp_systolic, tests)`` per
    rule, text cells (``-`` where an engine does not run it)."""
    return [(", ".join(r.ops), r.name, r.emulator.removeprefix("hlsnn."),
             *(", ".join(loops(r, e)) or "-" for e in ENGINES),
             "; ".join(t.removeprefix("tests/") for t in r.tests)) for r in RULES]
