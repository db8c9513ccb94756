"""``sparse_cluster``'s network mode: lowering rules (:mod:`.lower`), the network kernel (:mod:`.kernel`), its cycle and resource model (:mod:`.perf`)."""
