"""KubeRay manifests (infra/k8s/): no schema ships for KubeRay's custom resources, so this checks the
fields dicelab relies on against the ray.io/v1 API (KubeRay v1.5.1+, whose `authOptions` turns on
Ray token authentication), and that they agree with pyproject.toml and the Dockerfile."""

from __future__ import annotations

import pytest

# Field names of the ray.io/v1 types, from KubeRay's API reference (authOptions: v1.5.1 and later).
RAYCLUSTER_SPEC_FIELDS = {
    "authOptions", "autoscalerOptions", "enableInTreeAutoscaling", "gcsFaultToleranceOptions",
    "headGroupSpec", "headServiceAnnotations", "managedBy", "rayVersion", "suspend", "workerGroupSpecs",
}  # fmt: skip
HEAD_GROUP_FIELDS = {"enableIngress", "headService", "rayStartParams", "serviceType", "template"}
WORKER_GROUP_FIELDS = {
    "groupName", "idleTimeoutSeconds", "maxReplicas", "minReplicas", "numOfHosts", "rayStartParams",
    "replicas", "scaleStrategy", "suspend", "template",
}  # fmt: skip
AUTOSCALER_FIELDS = {
    "env", "envFrom", "idleTimeoutSeconds", "image", "imagePullPolicy", "resources", "securityContext",
    "upscalingMode", "version", "volumeMounts",
}  # fmt: skip
RAYJOB_SPEC_FIELDS = {
    "activeDeadlineSeconds", "backoffLimit", "clusterSelector", "deletionStrategy", "entrypoint",
    "entrypointNumCpus", "entrypointNumGpus", "entrypointResources", "jobId", "managedBy", "metadata",
    "rayClusterSpec", "runtimeEnvYAML", "schedule", "shutdownAfterJobFinishes", "submissionMode",
    "submitterConfig", "submitterPodTemplate", "suspend", "ttlSecondsAfterFinished",
}  # fmt: skip
GPU = "nvidia.com/gpu"


@pytest.fixture(params=["raycluster.yaml", "rayjob.yaml"])
def manifest(request, infra) -> dict:
    return infra.load_yaml(infra.root / "k8s" / request.param)


def cluster_spec(manifest: dict) -> dict:
    return manifest["spec"]["rayClusterSpec"] if manifest["kind"] == "RayJob" else manifest["spec"]


def containers(spec: dict) -> list[dict]:
    groups = [spec["headGroupSpec"], *spec["workerGroupSpecs"]]
    return [container for group in groups for container in group["template"]["spec"]["containers"]]


def test_kinds_and_api_version(manifest):
    assert manifest["apiVersion"] == "ray.io/v1"
    assert manifest["kind"] in {"RayCluster", "RayJob"}
    assert manifest["metadata"]["name"]


def test_uses_only_fields_of_the_kuberay_api(manifest):
    spec = cluster_spec(manifest)
    assert set(spec) <= RAYCLUSTER_SPEC_FIELDS
    assert set(spec["headGroupSpec"]) <= HEAD_GROUP_FIELDS
    assert set(spec.get("autoscalerOptions", {})) <= AUTOSCALER_FIELDS
    for group in spec["workerGroupSpecs"]:
        assert set(group) <= WORKER_GROUP_FIELDS
    if manifest["kind"] == "RayJob":
        assert set(manifest["spec"]) <= RAYJOB_SPEC_FIELDS


def test_ray_version_and_image_match_the_repository(manifest, infra):
    spec = cluster_spec(manifest)
    assert spec["rayVersion"] == infra.ray_pin
    for container in containers(spec):
        # The image built from infra/docker/Dockerfile, tagged with the dicelab version it holds.
        repository, _, tag = container["image"].rpartition(":")
        assert repository.endswith("/dicelab") and tag == infra.version, container["image"]


def test_token_authentication_is_on(manifest):
    assert cluster_spec(manifest)["authOptions"] == {"mode": "token"}


def test_head_service_is_not_exposed_outside_the_cluster(manifest):
    head = cluster_spec(manifest)["headGroupSpec"]
    assert head["serviceType"] == "ClusterIP"
    assert not head.get("enableIngress", False)
    assert head.get("headService", {}).get("spec", {}).get("type", "ClusterIP") == "ClusterIP"


def test_ray_start_params_are_strings(manifest):
    spec = cluster_spec(manifest)
    for group in [spec["headGroupSpec"], *spec["workerGroupSpecs"]]:
        params = group["rayStartParams"]
        assert all(isinstance(value, str) for value in params.values()), params  # map[string]string


def test_gpu_worker_group_requests_whole_gpus_and_autoscales(manifest):
    groups = cluster_spec(manifest)["workerGroupSpecs"]
    gpu_groups = []
    for group in groups:
        assert 0 <= group["minReplicas"] <= group.get("replicas", 0) <= group["maxReplicas"]
        for container in group["template"]["spec"]["containers"]:
            limits = container["resources"]["limits"]
            if GPU in limits:
                assert isinstance(limits[GPU], int) and limits[GPU] >= 1
                # Kubernetes requires GPU requests, when given, to equal the limits.
                assert container["resources"].get("requests", {}).get(GPU, limits[GPU]) == limits[GPU]
                gpu_groups.append(group["groupName"])
    assert gpu_groups, "a worker group must request nvidia.com/gpu"
    assert cluster_spec(manifest)["enableInTreeAutoscaling"] is True


def test_containers_run_as_non_root(manifest):
    spec = cluster_spec(manifest)
    for group in [spec["headGroupSpec"], *spec["workerGroupSpecs"]]:
        pod = group["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        for container in pod["containers"]:
            assert container["securityContext"]["allowPrivilegeEscalation"] is False


def test_rayjob_runs_the_raycluster_spec(infra):
    cluster = infra.load_yaml(infra.root / "k8s" / "raycluster.yaml")
    job = infra.load_yaml(infra.root / "k8s" / "rayjob.yaml")
    assert job["spec"]["rayClusterSpec"] == cluster["spec"]


def test_rayjob_runs_a_sweep_config_that_the_image_holds(infra):
    job = infra.load_yaml(infra.root / "k8s" / "rayjob.yaml")
    command, subcommand, config = job["spec"]["entrypoint"].split()[:3]
    assert (command, subcommand) == ("dicelab", "sweep")
    dockerfile = infra.root / "docker" / "Dockerfile"
    (workdir,) = [a for k, a in infra.dockerfile_instructions(dockerfile) if k == "WORKDIR"]
    assert config.startswith(f"{workdir}/experiments/")
    assert (infra.root.parent / config.removeprefix(f"{workdir}/")).is_file()
