"""Reading, checking and writing IR: the located parser, diagnostics, the verifier."""
