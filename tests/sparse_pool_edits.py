"""The sparse layer kernel's PoolBanks read, as the template renders it, and the planted variant
that reads the two rows in branches of their own: the text a schedule test and a strict
C-simulation test replace in the rendered ``sparse_cluster.cpp`` (one place, so that both plant
the same edit)."""

#: bank ``l`` read once, at the top row's or the held window's bottom row's address (a select
#: before one read), and cleared
POOL_ONE_READ = ("            if (rt || rb) {\n"
                 "              const acc_t got = HLSNN_LOAD_AT(acc[l], a, l);\n"
                 "              HLSNN_STORE_AT(acc[l], a, 0, l);\n")

#: the same values (the branches never both hold), but each branch a read site of every bank
POOL_READS_IN_BRANCHES = ("            acc_t got_t = 0, got_b = 0;\n"
                          "            if (rt) {\n"
                          "              got_t = HLSNN_LOAD_AT(acc[l], atop, l);\n"
                          "              HLSNN_STORE_AT(acc[l], atop, 0, l);\n"
                          "            }\n"
                          "            if (rb) {\n"
                          "              got_b = HLSNN_LOAD_AT(acc[l], hrow, l);\n"
                          "              HLSNN_STORE_AT(acc[l], hrow, 0, l);\n"
                          "            }\n"
                          "            if (rt || rb) {\n"
                          "              const acc_t got = rt ? got_t : got_b;\n")
