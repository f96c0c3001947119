"""Ways to run a dhir program: the reference interpreter and the native MPI backend."""
