"""Deciding which MPI rank runs each task (recorded as `dhir.rank`, see dhir.ir.tasks)."""
