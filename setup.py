"""Package map: the repository layout (schemas/, services/<name>/) installs under `assay.`.

The design fixes the folders; hyphenated service folders are not valid package names, so
each folder is mapped to a package here, in one place, for both editable and wheel installs.
"""

from setuptools import find_packages, setup

ROOTS = {
    "assay": "assay",
    "assay.schemas": "schemas",
    "assay.runner": "services/runner",
    "assay.sandbox_manager": "services/sandbox-manager",
    "assay.judge": "services/judge",
    "assay.aggregator": "services/aggregator",
}

packages: list[str] = []
for name, folder in ROOTS.items():
    packages.append(name)
    packages.extend(f"{name}.{sub}" for sub in find_packages(folder))

setup(
    packages=packages,
    package_dir=ROOTS,
    package_data={"": ["*.json", "*.yaml", "*.html", "py.typed"], "assay.schemas": ["json/*.json"]},
)
