"""Bad input never crashes the loader: any document gives jobs or an InvalidJob."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tfjob.api.errors import InvalidJob
from tfjob.frameworks.load import load_jobs

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=5))
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)
CONTAINER = st.fixed_dictionaries(
    {"name": st.sampled_from(["tensorflow", "x", 3])},
    optional={"image": VALUES, "command": VALUES, "ports": VALUES},
)
REPLICA = st.fixed_dictionaries(
    {},
    optional={
        "replicas": VALUES,
        "restartPolicy": VALUES,
        "template": st.fixed_dictionaries(
            {
                "spec": st.fixed_dictionaries(
                    {"containers": st.lists(CONTAINER, max_size=2) | VALUES}
                )
            }
        )
        | VALUES,
    },
)
DOCUMENT = st.fixed_dictionaries(
    {"apiVersion": st.just("kubeflow.org/v1"), "kind": st.just("TFJob")},
    optional={
        "metadata": st.fixed_dictionaries({}, optional={"name": VALUES}) | VALUES,
        "spec": st.fixed_dictionaries(
            {},
            optional={
                "tfReplicaSpecs": st.dictionaries(
                    st.sampled_from(["Worker", "PS", "chief", "x/y"]), REPLICA, max_size=3
                )
                | VALUES,
                "runPolicy": VALUES,
                "successPolicy": VALUES,
            },
        )
        | VALUES,
    },
)


@settings(max_examples=400, deadline=None)
@given(document=DOCUMENT)
def test_any_document_loads_or_is_rejected_with_field_errors(document: dict[str, object]) -> None:
    try:
        jobs = load_jobs(json.dumps(document), "fuzz.json")
    except InvalidJob as error:
        assert error.errors and all(e.path and e.message for e in error.errors)
    else:
        assert len(jobs) == 1


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=200))
def test_any_text_loads_or_is_rejected(text: str) -> None:
    try:
        load_jobs(text, "fuzz.yaml")
    except InvalidJob as error:
        assert error.errors
