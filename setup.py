"""The one build step pyproject.toml cannot say: the wheel carries the kata's exercises/ and solutions/ as package
data under grader/kata/ (grader.settings.KATA_ROOT), while the checkout keeps them, once, at its root."""

from __future__ import annotations

import os
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

KATA_FOLDERS = ("exercises", "solutions")


class BuildWithKata(build_py):
    def _get_data_files(self):  # type: ignore[no-untyped-def]
        files = super()._get_data_files()
        if self.editable_mode:  # an editable install reads the checkout's own folders
            return files
        for folder in KATA_FOLDERS:
            names = sorted(p.name for p in Path(folder).glob("*.py"))
            if not names:
                raise SystemExit(f"setup.py: no {folder}/*.py to put in the wheel (build from the repository root)")
            files.append((f"grader.kata.{folder}", folder, os.path.join(self.build_lib, "grader", "kata", folder),
                          names))
        return files


setup(cmdclass={"build_py": BuildWithKata})
