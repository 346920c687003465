"""`tfmw convert`: Kubeflow's TFJob examples as TFMultiWorkerJobs, what was changed said, and
every refusal naming the document and the field."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from tfmw_client import cli
from tfmw_client.convert import check_expansion, convert
from tfmw_client.errors import EXIT_ERROR, TfmwError
from tfmw_operator.api.spec import parse_job

# The shape of Kubeflow's examples/tensorflow/dist-mnist/tf_job_mnist.yaml (training-operator v1.9.4).
DIST_MNIST = """\
apiVersion: "kubeflow.org/v1"
kind: "TFJob"
metadata:
  name: "dist-mnist-for-e2e-test"
spec:
  tfReplicaSpecs:
    PS:
      replicas: 2
      restartPolicy: Never
      template:
        spec:
          containers:
            - name: tensorflow
              image: kubeflow/tf-dist-mnist-test:latest
    Worker:
      replicas: 4
      restartPolicy: Never
      template:
        spec:
          containers:
            - name: tensorflow
              image: kubeflow/tf-dist-mnist-test:latest
"""
CLAIM = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: strategy-volume}\n"


def run(*argv: str, stdin: str = "") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        code = cli.main(list(argv), out=out, err=err)
    finally:
        sys.stdin = saved
    return code, out.getvalue(), err.getvalue()


def test_dist_mnist_becomes_a_job_the_operator_parses_with_the_changes_as_comments(tmp_path: Path) -> None:
    manifest = tmp_path / "tf_job_mnist.yaml"
    manifest.write_text(DIST_MNIST)
    code, out, err = run("convert", "-f", str(manifest))
    assert (code, err) == (0, "")
    comments = [line for line in out.splitlines() if line.startswith("#")]
    assert comments[0].startswith("# Converted from a Kubeflow TFJob by tfmw convert ")
    assert "# spec.runPolicy.cleanPodPolicy: None, TFJob's default (tfmw's own is Running)" in comments
    (job,) = list(yaml.safe_load_all(out))
    assert (job["apiVersion"], job["kind"], job["metadata"]) == (
        "tfmw.dev/v1alpha1",
        "TFMultiWorkerJob",
        {"name": "dist-mnist-for-e2e-test"},
    )
    assert job["spec"]["workers"] == 4 and job["spec"]["parameterServers"]["replicas"] == 2
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == "kubeflow/tf-dist-mnist-test:latest"
    assert len(parse_job(job).members) == 6


def test_other_objects_pass_through_so_the_whole_file_applies() -> None:
    code, out, _ = run("convert", "-f", "-", stdin=CLAIM + "---\n" + DIST_MNIST + "---\n")
    assert code == 0
    documents = [d for d in yaml.safe_load_all(out) if d]
    assert [d["kind"] for d in documents] == ["PersistentVolumeClaim", "TFMultiWorkerJob"]
    assert documents[0] == yaml.safe_load(CLAIM)


def test_json_output_is_one_object_and_the_notes_go_to_standard_error() -> None:
    code, out, err = run("convert", "-f", "-", "-o", "json", stdin=DIST_MNIST)
    assert code == 0 and json.loads(out)["kind"] == "TFMultiWorkerJob"
    assert "note: spec.runPolicy.backoffLimit: unset: no limit, as TFJob has none" in err.splitlines()


def tfjob(**spec: Any) -> dict[str, Any]:
    document = yaml.safe_load(DIST_MNIST)
    document["spec"].update(spec)
    return dict(document)


@pytest.mark.parametrize(
    ("document", "said"),
    [
        (
            tfjob(enableDynamicWorker=True),
            "document 1 (TFJob dist-mnist-for-e2e-test): spec.enableDynamicWorker:",
        ),
        (tfjob(successPolicy="Some"), "spec.successPolicy: must be empty or AllWorkers, got 'Some'"),
        (
            tfjob(runPolicy={"minResources": {}}),
            "spec.runPolicy.minResources: has no meaning in tfmw: leave it out, and give the job a Kueue queue for its quota (docs/kueue.md)",
        ),
        (
            {**tfjob(), "apiVersion": "kubeflow.org/v2"},
            "apiVersion: 'kubeflow.org/v2' is not kubeflow.org/v1",
        ),
        ({**tfjob(), "metadata": {}}, "metadata.name: a TFJob needs a name"),
        ({"kind": "ConfigMap"}, "in.yaml: no TFJob found"),
        (["a list"], "in.yaml, document 1: not a Kubernetes object"),
    ],
)
def test_a_refusal_names_the_document_and_the_field(document: object, said: str) -> None:
    with pytest.raises(TfmwError) as raised:
        convert([document], "in.yaml")
    assert said in raised.value.message


def test_a_file_that_is_not_yaml_or_cannot_be_read_is_an_error(tmp_path: Path) -> None:
    code, _, err = run("convert", "-f", "-", stdin="a: [")
    assert code == EXIT_ERROR and "error: standard input is not YAML" in err
    code, _, err = run("convert", "-f", str(tmp_path / "missing.yaml"))
    assert code == EXIT_ERROR and "cannot read" in err and "missing.yaml" in err


ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True)
)


def test_an_alias_bomb_is_refused_before_it_is_written_out() -> None:
    code, out, err = run("convert", "-f", "-", "-o", "json", stdin=ALIAS_BOMB)
    assert code == EXIT_ERROR and out == ""
    assert "standard input: written out, it would be more than 64 MiB (its YAML aliases" in err
    assert "write the repeated parts out in full" in err


def test_a_long_string_behind_few_aliases_counts_by_its_length() -> None:
    # 10 KB behind 10**4 references: few values, 100 MB written out.
    long_string = "a: &s " + "A" * 10_000 + "\n"
    levels = (
        "l1: &l1 ["
        + ", ".join(["*s"] * 10)
        + "]\n"
        + "".join(f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 10)}]\n" for n in range(2, 5))
    )
    code, out, err = run("convert", "-f", "-", "-o", "json", stdin=long_string + levels)
    assert code == EXIT_ERROR and out == "" and "more than 64 MiB" in err


def test_a_few_aliases_and_an_anchor_that_holds_itself_are_told_apart() -> None:
    shared: dict[str, Any] = {"name": "tensorflow"}
    check_expansion([{"a": shared, "b": shared}], "in.yaml")  # an ordinary alias: fine
    looped: list[Any] = []
    looped.append(looped)
    with pytest.raises(TfmwError):
        check_expansion([looped], "in.yaml")
