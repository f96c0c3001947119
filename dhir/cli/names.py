"""What `dhir --help` says: the commands and their one-line help, kept apart from the
commands themselves so that `dhir`, `dhir --help` and `dhir --version` load nothing else."""

DESCRIPTION = "Compile and run dhir programs across MPI ranks."
COMMANDS = {
    "run": "run a program (or an executable built by `dhir compile`)",
    "compile": "build an executable for a fixed rank count",
    "schedule": "place a program's tasks (or a task graph) on devices and show the schedule",
    "calibrate": "measure this machine (MPI, memory, compute, GPUs) and write its description",
    "gantt": "draw a trace that dhir run --trace recorded as a Gantt chart",
    "cache": "show the build cache's size and contents, or remove old builds",
}
