"""The RayJob state table (planning/rayjob/states.py, docs/design.md §11): every transition
in the table is made by the planner for its cause, and the planner makes no other, whatever
it observes (a property test over random observations)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from raycluster_operator.planning.rayjob import (
    TRANSITIONS,
    Cause,
    Context,
    DeploymentStatus,
    JobsApi,
    Move,
    Observed,
    plan_rayjob,
)
from raycluster_operator.planning.rayjob.states import EXTENSIONS, successors

S = DeploymentStatus
NOW = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)
EARLIER = "2026-12-01T11:00:00Z"
CTX = Context(NOW, "abcde", 1.0)
CLUSTER_SPEC = {"headGroupSpec": {"template": {"spec": {"containers": [{"image": "ray"}]}}}}
READY: dict[str, Any] = {
    "spec": CLUSTER_SPEC,
    "metadata": {"name": "c"},
    "status": {"state": "ready", "desiredWorkerSlices": 1, "readyWorkerSlices": 1},
}
NOT_READY: dict[str, Any] = {**READY, "status": {"state": "", "desiredWorkerSlices": 1}}
SUBMITTER_FAILED: dict[str, Any] = {
    "metadata": {"name": "j"},
    "status": {"conditions": [{"type": "Failed", "status": "True"}]},
}
SUBMITTER_DONE: dict[str, Any] = {
    "metadata": {"name": "j"},
    "status": {"conditions": [{"type": "Complete", "status": "True"}]},
}


def rayjob(state: S, spec: dict[str, Any] | None = None, **status: Any) -> dict[str, Any]:
    base_spec: dict[str, Any] = {
        "entrypoint": "python x.py",
        "rayClusterSpec": CLUSTER_SPEC,
        "submissionMode": "HTTPMode",
    }
    base_status: dict[str, Any] = {
        "jobDeploymentStatus": state.value,
        "startTime": "2026-12-01T11:59:59Z",
        "jobId": "j-1",
        "rayClusterName": "c",
    }
    return {
        "metadata": {"name": "j", "namespace": "ns", "generation": 1},
        "spec": {**base_spec, **(spec or {})},
        "status": {**base_status, **status},
    }


def broken_pod() -> dict[str, Any]:
    return {
        "metadata": {
            "name": "w-1",
            "creationTimestamp": "2026-12-01T10:00:00Z",
            "deletionTimestamp": "2026-12-01T12:00:30Z",
            "labels": {
                "ray.io/node-type": "worker",
                "ray.io/group": "tpu",
                "replicaIndex": "tpu-0",
                "ray.io/replica-host-index": "1",
            },
        },
        "spec": {"nodeName": "n1"},
        "status": {"phase": "Running"},
    }


RUNNING_INFO = {"rayJobInfo": {"startTime": EARLIER}}

#: One observation per move of the table that makes the planner take exactly that move.
SCENARIOS: dict[Move, Observed] = {
    Move(S.NEW, S.INITIALIZING, Cause.INITIALIZED): Observed(rayjob(S.NEW, jobId=None)),
    Move(S.NEW, S.VALIDATION_FAILED, Cause.INVALID_SPEC): Observed(
        rayjob(S.NEW, {"entrypoint": ""})
    ),
    Move(S.INITIALIZING, S.SUSPENDING, Cause.SUSPEND): Observed(
        rayjob(S.INITIALIZING, {"suspend": True})
    ),
    Move(S.INITIALIZING, S.FAILED, Cause.DEADLINE_EXCEEDED): Observed(
        rayjob(S.INITIALIZING, {"activeDeadlineSeconds": 1})
    ),
    Move(S.INITIALIZING, S.FAILED, Cause.PRE_RUNNING_DEADLINE_EXCEEDED): Observed(
        rayjob(S.INITIALIZING, {"preRunningDeadlineSeconds": 1})
    ),
    Move(S.INITIALIZING, S.RUNNING, Cause.CLUSTER_READY): Observed(
        rayjob(S.INITIALIZING), cluster=READY
    ),
    Move(S.INITIALIZING, S.WAITING, Cause.AWAIT_USER): Observed(
        rayjob(S.INITIALIZING, {"submissionMode": "InteractiveMode"}), cluster=READY
    ),
    Move(S.WAITING, S.RUNNING, Cause.USER_SUBMITTED): Observed(
        rayjob(S.WAITING, {"submissionMode": "InteractiveMode", "jobId": "mine"})
    ),
    Move(S.WAITING, S.FAILED, Cause.PRE_RUNNING_DEADLINE_EXCEEDED): Observed(
        rayjob(S.WAITING, {"submissionMode": "InteractiveMode", "preRunningDeadlineSeconds": 1})
    ),
    Move(S.RUNNING, S.SUSPENDING, Cause.SUSPEND): Observed(
        rayjob(S.RUNNING, {"suspend": True}), cluster=READY
    ),
    Move(S.RUNNING, S.FAILED, Cause.DEADLINE_EXCEEDED): Observed(
        rayjob(S.RUNNING, {"activeDeadlineSeconds": 1}), cluster=READY
    ),
    Move(S.RUNNING, S.COMPLETE, Cause.JOB_ENDED): Observed(
        rayjob(S.RUNNING), READY, (), None, JobsApi.FOUND, {"status": "SUCCEEDED"}
    ),
    Move(S.RUNNING, S.FAILED, Cause.APP_FAILED): Observed(
        rayjob(S.RUNNING), READY, (), None, JobsApi.FOUND, {"status": "FAILED"}
    ),
    Move(S.RUNNING, S.FAILED, Cause.SUBMISSION_FAILED): Observed(
        rayjob(S.RUNNING, {"submissionMode": "K8sJobMode"}),
        READY,
        (),
        SUBMITTER_FAILED,
        JobsApi.NOT_FOUND,
    ),
    Move(S.RUNNING, S.INITIALIZING, Cause.SLICE_RESUBMIT): Observed(
        rayjob(S.RUNNING, {"sliceFailurePolicy": "Resubmit", "backoffLimit": 1}, **RUNNING_INFO),
        READY,
        (broken_pod(),),
    ),
    Move(S.RUNNING, S.FAILED, Cause.SLICE_FAILED): Observed(
        rayjob(S.RUNNING, {"sliceFailurePolicy": "FailJob"}, **RUNNING_INFO),
        READY,
        (broken_pod(),),
    ),
    Move(S.FAILED, S.RETRYING, Cause.RETRY): Observed(
        rayjob(S.RUNNING, {"backoffLimit": 1}), READY, (), None, JobsApi.FOUND, {"status": "FAILED"}
    ),
    Move(S.RETRYING, S.NEW, Cause.RESOURCES_RELEASED): Observed(rayjob(S.RETRYING)),
    Move(S.SUSPENDING, S.SUSPENDED, Cause.RESOURCES_RELEASED): Observed(
        rayjob(S.SUSPENDING, {"suspend": True})
    ),
    Move(S.SUSPENDED, S.NEW, Cause.RESUME): Observed(rayjob(S.SUSPENDED)),
}


def test_every_transition_of_the_table_is_made_for_its_cause() -> None:
    assert set(SCENARIOS) == TRANSITIONS
    for move, observed in SCENARIOS.items():
        plan = plan_rayjob(observed, CTX)
        assert move in plan.moves, (move, plan.moves)


def test_the_extensions_are_the_slice_policy_moves() -> None:
    assert {m.cause for m in EXTENSIONS} == {Cause.SLICE_RESUBMIT, Cause.SLICE_FAILED}
    assert successors(S.COMPLETE) == frozenset()  # terminal: only deletion happens after


def test_waiting_states_make_no_move() -> None:
    quiet = [
        Observed(rayjob(S.INITIALIZING), cluster=NOT_READY),
        Observed(rayjob(S.RUNNING), READY, (), None, JobsApi.FOUND, {"status": "RUNNING"}),
        # K8sJobMode: the Ray job ended but the submitter still follows its logs.
        Observed(
            rayjob(S.RUNNING, {"submissionMode": "K8sJobMode"}),
            READY,
            (),
            {"metadata": {"name": "j"}, "status": {}},
            JobsApi.FOUND,
            {"status": "SUCCEEDED"},
        ),
        Observed(rayjob(S.SUSPENDING, {"suspend": True}), cluster=READY),
        Observed(rayjob(S.SUSPENDED, {"suspend": True})),
        Observed(rayjob(S.WAITING, {"submissionMode": "InteractiveMode"})),
        Observed(rayjob(S.COMPLETE, jobStatus="SUCCEEDED", endTime=EARLIER), cluster=READY),
        Observed(rayjob(S.RUNNING, **RUNNING_INFO), READY, (broken_pod(),)),  # LeaveToRay
    ]
    for observed in quiet:
        assert plan_rayjob(observed, CTX).moves == [], observed


STATES = st.sampled_from(list(S))
SPEC = st.fixed_dictionaries(
    {},
    optional={
        "suspend": st.booleans(),
        "activeDeadlineSeconds": st.integers(1, 10_000),
        "preRunningDeadlineSeconds": st.integers(1, 10_000),
        "backoffLimit": st.integers(0, 3),
        "submissionMode": st.sampled_from(["K8sJobMode", "HTTPMode", "InteractiveMode"]),
        "sliceFailurePolicy": st.sampled_from(["LeaveToRay", "Resubmit", "FailJob"]),
        "jobId": st.just("user-id"),
        "shutdownAfterJobFinishes": st.booleans(),
        "ttlSecondsAfterFinished": st.integers(0, 10),
    },
)


@settings(max_examples=400, deadline=None)
@given(
    state=STATES,
    spec=SPEC,
    cluster=st.sampled_from([None, READY, NOT_READY]),
    submitter=st.sampled_from([None, SUBMITTER_FAILED, SUBMITTER_DONE]),
    api=st.sampled_from(list(JobsApi)),
    job_status=st.sampled_from(["", "PENDING", "RUNNING", "STOPPED", "SUCCEEDED", "FAILED"]),
    broken=st.booleans(),
    failed=st.integers(0, 4),
    started=st.integers(0, 20_000),
)
def test_the_planner_makes_no_move_the_table_lacks(
    state: S,
    spec: dict[str, Any],
    cluster: dict[str, Any] | None,
    submitter: dict[str, Any] | None,
    api: JobsApi,
    job_status: str,
    broken: bool,
    failed: int,
    started: int,
) -> None:
    start = (NOW - timedelta(seconds=started)).strftime("%Y-%m-%dT%H:%M:%SZ")
    status: dict[str, Any] = {"failed": failed, "startTime": start, **RUNNING_INFO}
    if state in (S.COMPLETE, S.FAILED):
        status["endTime"] = start
    observed = Observed(
        rayjob(state, spec, **status),
        cluster,
        (broken_pod(),) if broken else (),
        submitter,
        api,
        {"status": job_status} if api == JobsApi.FOUND else {},
    )
    plan = plan_rayjob(observed, CTX)  # check_transition raises on a move not in the table
    assert set(plan.moves) <= TRANSITIONS
    for before, after in zip(plan.moves, plan.moves[1:], strict=False):
        assert before.target == after.source  # moves chain
    assert plan.status.get("jobDeploymentStatus", "") == (
        plan.moves[-1].target.value if plan.moves else state.value
    )


def test_a_stopped_job_waits_while_a_slice_is_gone_under_a_slice_policy() -> None:
    """The operator that stopped the job for a break may have crashed before writing the move;
    while the slice is gone (no pods, none replaced yet) the next one must not end the job
    Complete: the break shows once the replacement exists (issue #36's proof run found it)."""
    status = {
        "desiredWorkerSlices": 1,
        "workerGroups": [{"groupName": "tpu", "numOfHosts": 2, "desiredSlices": 1}],
    }
    gone = {**READY, "status": {**READY["status"], **status}}
    for policy, waits in (("Resubmit", True), ("FailJob", True), ("LeaveToRay", False)):
        job = rayjob(S.RUNNING, {"sliceFailurePolicy": policy, "backoffLimit": 1}, **RUNNING_INFO)
        observed = Observed(job, gone, (), None, JobsApi.FOUND, {"status": "STOPPED"})
        plan = plan_rayjob(observed, CTX)
        assert (plan.moves == []) is waits, (policy, plan.moves)
