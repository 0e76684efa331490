"""Install-time build: renders the kernels from templates/ and compiles them with cffi."""
import shutil
import sys
import types
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
# Load gen's build-time modules without running gen/__init__ (which needs the runtime deps).
sys.modules["gen"] = types.ModuleType("gen")
sys.modules["gen"].__path__ = [str(ROOT / "gen")]
from gen import compile as gen_compile  # noqa: E402


class BuildPyWithTemplates(build_py):
    """Ships the top-level templates/ inside the package (run-time codegen and export)."""

    def run(self):
        super().run()
        shutil.copytree(ROOT / "templates", Path(self.build_lib) / "gen" / "templates",
                        dirs_exist_ok=True)


setup(
    ext_modules=gen_compile.extensions(str(ROOT / "build" / "csrc")),
    cmdclass={"build_py": BuildPyWithTemplates},
    options={"build_ext": {"parallel": 2}},
)
