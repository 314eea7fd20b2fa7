"""The lake's credentials on their way to Spark (plugins/sixnines_airflow/lake_spark.py), read from the command the
Spark provider really builds: never an argument of spark-submit, whatever the master; on YARN or Kubernetes,
where the provider would make them `--conf` arguments, refused unless the cluster brings its own."""

from __future__ import annotations

import json

import airflow.settings  # noqa: F401  Airflow's settings put the plugins folder (sixnines_airflow) on sys.path
import pytest

from bench_tasks import S3Settings, StorageError

SECRET = "lake-secret-Zq9"
SETTINGS = S3Settings(
    access_key="lake-user",
    secret_key=SECRET,
    session_token="lake-token-Xv2",
    endpoint_url="http://minio:9000",
    region="eu-west-1",
    source="connection sixnines_lake_s3",
)


def operator(monkeypatch: pytest.MonkeyPatch, master: str, deploy_mode: str | None = None):
    """The analysis task's operator, its Spark connection pointing at `master`."""
    from sixnines_airflow.lake_spark import LakeSparkSubmitOperator

    extra = {"deploy-mode": deploy_mode} if deploy_mode else {}
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_TEST", json.dumps({"conn_type": "spark", "host": master, "extra": extra}))
    return LakeSparkSubmitOperator(task_id="analysis", application="pipeline.py", conn_id="spark_test")


def submitted(op) -> tuple[str, dict[str, str]]:
    """The spark-submit command line the provider builds, and the environment it gives the process."""
    hook = op._get_hook()
    command = " ".join(hook._build_spark_submit_command("pipeline.py"))
    return command, dict(hook._env or {})


@pytest.mark.parametrize("master", ["local[1]", "spark://spark-master:7077"])
def test_a_local_or_standalone_driver_gets_the_credentials_in_its_environment_only(
    monkeypatch: pytest.MonkeyPatch, master: str
) -> None:
    monkeypatch.delenv("SIXNINES_LAKE_SPARK_CREDENTIALS", raising=False)
    op = operator(monkeypatch, master)
    assert op.hand_settings(SETTINGS) == (master, "hand")
    command, env = submitted(op)
    assert SECRET not in command and "lake-user" not in command and "lake-token" not in command
    assert "spark.hadoop.fs.s3a.endpoint=http://minio:9000" in command
    assert env["AWS_SECRET_ACCESS_KEY"] == SECRET and env["AWS_SESSION_TOKEN"] == "lake-token-Xv2"
    assert env["SIXNINES_LAKE_CONN_ID"] == ""  # the driver does not ask Airflow's connection again


@pytest.mark.parametrize("deploy_mode", [None, "cluster"])
def test_yarn_is_refused_the_credentials_it_would_put_on_the_command_line(
    monkeypatch: pytest.MonkeyPatch, deploy_mode: str | None
) -> None:
    monkeypatch.delenv("SIXNINES_LAKE_SPARK_CREDENTIALS", raising=False)
    op = operator(monkeypatch, "yarn", deploy_mode)
    with pytest.raises(StorageError, match=r"Spark master 'yarn'.*AWS_ACCESS_KEY_ID.*SIXNINES_LAKE_SPARK_CREDENTIALS"):
        op.hand_settings(SETTINGS)
    assert not op.env_vars  # nothing was handed over


def test_yarn_with_the_clusters_own_credentials_gets_none_of_ours(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIXNINES_LAKE_SPARK_CREDENTIALS", "cluster")
    op = operator(monkeypatch, "yarn")
    assert op.hand_settings(SETTINGS) == ("yarn", "cluster")
    command, env = submitted(op)
    assert SECRET not in command and "lake-user" not in command and "lake-token" not in command
    assert "spark.yarn.appMasterEnv.AWS_ENDPOINT_URL=http://minio:9000" in command  # not a secret: handed over
    assert not {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"} & env.keys()


def test_the_policy_by_master() -> None:
    """Kubernetes too (its provider path needs the kubernetes client, not installed here): the same rule."""
    from sixnines_airflow.lake_spark import driver_environment

    env = SETTINGS.environment()
    with pytest.raises(StorageError, match="k8s://https://api:6443"):
        driver_environment(env, "k8s://https://api:6443", "hand")
    assert driver_environment(env, "k8s://https://api:6443", "cluster") == {
        "AWS_ENDPOINT_URL": "http://minio:9000",
        "AWS_DEFAULT_REGION": "eu-west-1",
    }
    no_keys = {"AWS_ENDPOINT_URL": "http://minio:9000"}  # s3a's default chain: nothing secret to refuse
    assert driver_environment(no_keys, "yarn", "hand") == no_keys
    assert driver_environment(env, "local[*]", "hand") == env
    with pytest.raises(StorageError, match="SIXNINES_LAKE_SPARK_CREDENTIALS='cluser'"):
        driver_environment(env, "yarn", "cluser")
