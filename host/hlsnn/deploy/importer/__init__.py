"""Stage 1, import: an ONNX file becomes a :class:`~hlsnn.deploy.importer.graph.Network`
(:func:`~hlsnn.deploy.importer.onnx_import.load_onnx`), after the graph rewrites of
:mod:`hlsnn.deploy.rewrite`; models quantized elsewhere (QDQ, QONNX) read as formats
(:mod:`~hlsnn.deploy.importer.qimport`); the float reference the deployment is measured against."""
