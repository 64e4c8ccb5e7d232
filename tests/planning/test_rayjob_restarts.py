"""What a RayJob pass plans when its caches lag its own writes, as after a restart, a dropped
watch or a resubmission (docs/design.md §11, rules on Submission and Retries): an earlier
attempt's submitter is never taken for this attempt's, a cluster the cache has not shown yet
is deleted by name before a release forgets it, and a cluster's status that still reads ready
after a slice broke is not believed over its pods."""

from __future__ import annotations

from typing import Any

from raycluster_operator.builders import rayjob as build
from raycluster_operator.planning.rayjob import ActionKind, DeploymentStatus, JobsApi, Observed
from raycluster_operator.planning.rayjob import plan_rayjob as plan
from tests.planning.test_rayjob_states import CTX, READY, SUBMITTER_FAILED, rayjob

S = DeploymentStatus
K8S = {"submissionMode": "K8sJobMode"}


def submitter_for(job_id: str, **extra: Any) -> dict[str, Any]:
    """A submitter Job as the builder makes it, for ``job_id``."""
    job = build.submitter_job(rayjob(S.INITIALIZING, K8S), READY["spec"], "h:8265", job_id)
    return {**job, **extra}


def test_the_builder_records_the_submission_id() -> None:
    assert build.submitter_job_id(submitter_for("j-7")) == "j-7"
    assert build.submitter_job_id(SUBMITTER_FAILED) is None


def test_a_users_own_submission_id_variable_does_not_make_the_submitter_foreign() -> None:
    """The user's submitterPodTemplate sets RAY_JOB_SUBMISSION_ID; ours comes after it and is
    the one the container sees, so this attempt's submitter is its own (before: deleted and
    created again on every pass)."""
    env = [{"name": "RAY_JOB_SUBMISSION_ID", "value": "mine"}]
    template = {"spec": {"containers": [{"name": "submit", "image": "ray", "env": env}]}}
    spec = {**K8S, "submitterPodTemplate": template}
    job = build.submitter_job(rayjob(S.INITIALIZING, spec), READY["spec"], "h:8265", "j-1")
    assert build.submitter_job_id(job) == "j-1"
    done = plan(Observed(rayjob(S.INITIALIZING, spec), READY, (), job), CTX)
    assert done.actions == [] and [m.target for m in done.moves] == [S.RUNNING]


def test_an_earlier_attempts_submitter_is_deleted_before_a_new_one() -> None:
    stale = submitter_for("j-0")
    done = plan(Observed(rayjob(S.INITIALIZING, K8S), READY, (), stale), CTX)
    assert [(a.kind, a.name) for a in done.actions] == [(ActionKind.DELETE_SUBMITTER, "j")]
    assert done.moves == []
    # Once it is gone, this attempt's submitter is created and the job runs.
    fresh = plan(Observed(rayjob(S.INITIALIZING, K8S), READY), CTX)
    (create,) = fresh.actions
    assert create.kind == ActionKind.CREATE_SUBMITTER
    assert build.submitter_job_id(create.body) == "j-1"
    assert [m.target for m in fresh.moves] == [S.RUNNING]


def test_this_attempts_submitter_moves_on_without_a_second_one() -> None:
    own = submitter_for("j-1")
    done = plan(Observed(rayjob(S.INITIALIZING, K8S), READY, (), own), CTX)
    assert done.actions == [] and [m.target for m in done.moves] == [S.RUNNING]


def test_an_earlier_attempts_failed_submitter_does_not_fail_this_one() -> None:
    failed_before = submitter_for("j-0", status=SUBMITTER_FAILED["status"])
    observed = Observed(rayjob(S.RUNNING, K8S), READY, (), failed_before, JobsApi.NOT_FOUND)
    assert plan(observed, CTX).moves == []
    observed = Observed(rayjob(S.RUNNING, K8S), READY, (), failed_before, JobsApi.UNREACHABLE)
    assert plan(observed, CTX).moves == []


def test_a_release_deletes_by_name_the_cluster_the_cache_has_not_shown() -> None:
    for state, target in ((S.SUSPENDING, S.SUSPENDED), (S.RETRYING, S.NEW)):
        done = plan(Observed(rayjob(state, {"suspend": state == S.SUSPENDING})), CTX)
        assert [(a.kind, a.name) for a in done.actions] == [(ActionKind.DELETE_CLUSTER, "c")]
        assert [m.target for m in done.moves] == [target]
        assert "rayClusterName" not in done.status


def test_a_release_never_deletes_a_selected_cluster() -> None:
    spec = {"suspend": True, "rayClusterSpec": None, "clusterSelector": {"ray.io/cluster": "c"}}
    done = plan(Observed(rayjob(S.SUSPENDING, spec)), CTX)
    assert done.actions == [] and [m.target for m in done.moves] == [S.SUSPENDED]


#: The cluster's status before its controller saw a break: one 2-host slice, ready.
STALE_READY: dict[str, Any] = {
    **READY,
    "status": {
        "state": "ready",
        "desiredWorkerSlices": 1,
        "readyWorkerSlices": 1,
        "workerGroups": [{"groupName": "tpu", "numOfHosts": 2, "desiredSlices": 1}],
    },
}


def worker(host: int, replica: str = "tpu-a", **meta: Any) -> dict[str, Any]:
    labels = {
        "ray.io/node-type": "worker",
        "ray.io/group": "tpu",
        "ray.io/worker-group-replica-name": replica,
        "ray.io/worker-group-replica-index": "0",
        "ray.io/replica-host-index": str(host),
    }
    return {
        "metadata": {"name": f"{replica}-{host}", "uid": f"{replica}-{host}", "labels": labels}
        | meta,
        "spec": {"nodeName": f"n{host}"},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def test_a_status_that_lags_its_pods_does_not_start_the_job() -> None:
    """§11, 11c: after a resubmission the cluster's status can still read ready while the
    slice's pods are terminating, gone, or replaced but not ready yet."""
    going = worker(1, deletionTimestamp="2026-12-01T12:00:30Z")
    starting = {**worker(1, "tpu-b"), "status": {"phase": "Pending"}}
    for pods in ((worker(0), going), (worker(0),), (worker(0, "tpu-b"), starting), ()):
        done = plan(Observed(rayjob(S.INITIALIZING), STALE_READY, pods), CTX)
        assert done.moves == [] and done.actions == [], pods
    healed = (worker(0, "tpu-b"), worker(1, "tpu-b"))
    done = plan(Observed(rayjob(S.INITIALIZING), STALE_READY, healed), CTX)
    assert [m.target for m in done.moves] == [S.RUNNING]


def test_without_slice_counts_ready_pods_are_counted() -> None:
    """Under KubeRay's CRD the status keeps pod counts only: ready worker pods count."""
    status = {"state": "ready", "desiredWorkerReplicas": 2, "readyWorkerReplicas": 2}
    cluster = {**READY, "status": status}
    for pods, moves in (((worker(0),), []), ((worker(0), worker(1)), [S.RUNNING])):
        done = plan(Observed(rayjob(S.INITIALIZING), cluster, pods), CTX)
        assert [m.target for m in done.moves] == moves
