"""What scripts/setup.sh installs from apt (LLVM/MLIR 22), and the one way dhir's errors
tell a user to install it: from the passes that run mlir-opt as from the toolchain.
tests/unit/test_doc_links.py checks that setup.sh and README.md list the same packages."""

LLVM_VERSION = 22
APT_PACKAGES = "mlir-22-tools clang-22 lld-22 libomp-22-dev"
SETUP_HINT = "run `bash scripts/setup.sh`"


def llvm_hint(reinstall: bool = False) -> str:
    """What to do when LLVM/MLIR is missing (`reinstall` False) or will not run."""
    verb, flag = (
        ("reinstall", "--reinstall") if reinstall else ("install", "--no-install-recommends")
    )
    return (
        f"{verb} LLVM/MLIR {LLVM_VERSION}: {SETUP_HINT}, or "
        f"`sudo apt-get install {flag} {APT_PACKAGES}` (Debian 12: bookworm-security)"
    )
