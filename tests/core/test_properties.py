"""Properties that must hold for any observed state, checked with hypothesis.

- the core never crashes and is deterministic;
- it never creates a pod whose slot is taken, nor the same pod twice in one plan;
- a job never ends both Succeeded and Failed, and Failed is never undone;
- finished jobs never get new pods or services.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from testkit.builders import actions_of, advance, job, later, pod, replica, run, service
from tfjob.api.observed import Pod
from tfjob.core.plan import CreatePod, CreateService
from tfjob.frameworks.tensorflow import TFJob

POLICIES = st.sampled_from(["Never", "OnFailure", "Always", "ExitCode"])
PHASES = st.sampled_from(["Pending", "Running", "Succeeded", "Failed"])
EXIT_CODES = st.one_of(st.none(), st.sampled_from([0, 1, 2, 127, 128, 130, 137, 143, 255]))


@st.composite
def jobs(draw: st.DrawFn) -> TFJob:
    types = draw(st.sets(st.sampled_from(["Chief", "PS", "Worker", "Evaluator"]), min_size=1))
    specs = {t: replica(draw(st.integers(0, 3)), restart=draw(POLICIES)) for t in types}
    run_policy = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "backoffLimit": st.integers(0, 3),
                "activeDeadlineSeconds": st.integers(1, 100),
                "cleanPodPolicy": st.sampled_from(["All", "Running", "None"]),
                "suspend": st.booleans(),
            },
        )
    )
    return job(run_policy=run_policy, **specs)


@st.composite
def observed(draw: st.DrawFn, tfjob: TFJob) -> list[Pod]:
    found = []
    for rtype, spec in tfjob.spec.tf_replica_specs.items():
        for index in range((spec.replicas or 0) + 1):
            if draw(st.booleans()):
                phase = draw(PHASES)
                code = draw(EXIT_CODES) if phase in ("Failed", "Succeeded") else None
                found.append(
                    pod(
                        rtype.lower(),
                        index,
                        phase,
                        exit_code=code,
                        restarts=draw(st.integers(0, 2)),
                        terminating=draw(st.booleans()),
                    )
                )
    return found


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_core_invariants(data: st.DataObject) -> None:
    tfjob = data.draw(jobs())
    for step in range(3):
        current = data.draw(observed(tfjob))
        plan = run(tfjob, current, now=later(step * 30))
        assert plan == run(tfjob, current, now=later(step * 30))  # deterministic
        created = [a.name for a in actions_of(plan, CreatePod)]
        assert len(created) == len(set(created))
        assert not set(created) & {p.metadata.name for p in current}
        true_types = Counter(c.type for c in plan.status.conditions if c.status == "True")
        assert not (true_types["Succeeded"] and true_types["Failed"])
        was_failed = any(c.type == "Failed" and c.status == "True" for c in tfjob.status.conditions)
        if was_failed:
            assert true_types["Failed"]
            assert not actions_of(plan, CreatePod) and not actions_of(plan, CreateService)
        tfjob = advance(tfjob, plan)


@settings(max_examples=200, deadline=None)
@given(
    phases=st.lists(PHASES, min_size=1, max_size=4),
    codes=st.lists(EXIT_CODES, min_size=4, max_size=4),
)
def test_services_exist_for_every_replica_while_running(
    phases: list[str], codes: list[int | None]
) -> None:
    tfjob = job(Worker=replica(len(phases)))
    current = [pod("worker", i, p, exit_code=codes[i]) for i, p in enumerate(phases)]
    plan = run(tfjob, current, [service("worker", 0)])
    if not plan.finished:
        names = {a.name for a in actions_of(plan, CreateService)}
        assert names == {f"test-tfjob-worker-{i}" for i in range(1, len(phases))}
