"""The corpora of malformed jobs: TFJobs in tests/fixtures/malformed/, the other kinds in
tests/fixtures/malformed-<framework>/ (pytorch, jax, xgboost, paddle, mpi), each as
<category>/<nn>-<slug>.yaml.

Each file holds one job that a cluster must refuse, and starts with two comment
lines: what is wrong with it, and `# field: <name>`, a word every error report about
it must contain (the field's name), on both runtimes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"
CORPUS = FIXTURES / "malformed"
PYTORCH_CORPUS = FIXTURES / "malformed-pytorch"
# JAXJob, XGBoostJob, PaddleJob, MPIJob by kind. Their `yaml` category holds files the API
# server refuses as YAML (a key twice), which kubectl, sending JSON, does not show it.
KIND_CORPORA = {
    "JAXJob": FIXTURES / "malformed-jax",
    "XGBoostJob": FIXTURES / "malformed-xgboost",
    "PaddleJob": FIXTURES / "malformed-paddle",
    "MPIJob": FIXTURES / "malformed-mpi",
}


@dataclass(frozen=True)
class Case:
    path: Path
    category: str
    what: str
    field: str

    @property
    def id(self) -> str:
        return f"{self.category}/{self.path.stem}"


def cases(corpus: Path = CORPUS) -> list[Case]:
    found = []
    for path in sorted(corpus.glob("*/*.yaml")):
        lines = path.read_text().splitlines()
        what = lines[0].removeprefix("# ")
        field = lines[1].removeprefix("# field: ")
        found.append(Case(path, path.parent.name, what, field))
    return found
