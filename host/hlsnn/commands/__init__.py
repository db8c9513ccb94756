"""The command line's commands by group (:mod:`hlsnn.cli` builds the parser)."""
