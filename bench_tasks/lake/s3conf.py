"""Where an S3 lake's credentials and endpoint come from: the lake's Airflow connection inside Airflow, else the
environment. They reach pyarrow's S3 filesystem, Spark's Hadoop settings and child processes' environment, and
never a log or a record."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import pyarrow.fs as pafs

from ..errors import SixninesError

CONN_ID_ENV = "SIXNINES_LAKE_CONN_ID"
DEFAULT_CONN_ID = "sixnines_lake_s3"


class StorageError(SixninesError):
    """The lake's storage cannot be reached or is misconfigured (the message names the setting or the object)."""


# -- credentials ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class S3Settings:
    """Everything needed to reach the lake's bucket, from one source (Airflow connection or AWS environment)."""

    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    endpoint_url: str | None = None  # e.g. http://127.0.0.1:9000 for MinIO or moto; None: AWS itself
    region: str | None = None
    source: str = "environment"  # where these came from, for messages: `environment` or `connection <id>`

    def filesystem(self) -> pafs.S3FileSystem:
        """The pyarrow S3 filesystem for these settings (path-style addressing when an endpoint is given)."""
        return s3_filesystem(self)

    def spark_conf(self) -> dict[str, str]:
        """Spark's s3a settings without secrets (safe on a command line): implementation, endpoint, path style."""
        conf = {
            "spark.hadoop.fs.s3a.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
            "spark.hadoop.fs.s3a.path.style.access": "true" if self.endpoint_url else "false",
        }
        if self.endpoint_url:
            conf["spark.hadoop.fs.s3a.endpoint"] = self.endpoint_url
            conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(self.endpoint_url.startswith("https")).lower()
        if self.region or self.endpoint_url:  # an S3-compatible endpoint still needs a region to sign with
            conf["spark.hadoop.fs.s3a.endpoint.region"] = self.region or "us-east-1"
        return conf

    def hadoop_secrets(self) -> dict[str, str]:
        """The s3a credentials, set on the running session's Hadoop configuration (never on a command line)."""
        if not self.access_key:
            return {}  # s3a's default chain: environment, instance profile, …
        out = {"fs.s3a.access.key": self.access_key, "fs.s3a.secret.key": self.secret_key or ""}
        if self.session_token:
            out["fs.s3a.session.token"] = self.session_token
            out["fs.s3a.aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
        else:
            out["fs.s3a.aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
        return out

    def environment(self) -> dict[str, str]:
        """The same settings as AWS environment variables, for a subprocess (spark-submit's driver)."""
        pairs = {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_SESSION_TOKEN": self.session_token,
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_DEFAULT_REGION": self.region,
        }
        return {k: v for k, v in pairs.items() if v}


def lake_conn_id() -> str:
    return os.environ.get(CONN_ID_ENV, DEFAULT_CONN_ID)


def s3_settings() -> S3Settings:
    """The lake's S3 settings: the Airflow connection when running inside Airflow, else the AWS environment."""
    conn_id = lake_conn_id()
    if conn_id and _inside_airflow(conn_id):
        return _from_connection(conn_id)
    return _from_environment()


def _inside_airflow(conn_id: str) -> bool:
    """A task process (Airflow already imported) or a connection given as `AIRFLOW_CONN_<ID>`; the CLI and a
    Spark driver never pay for importing Airflow."""
    return "airflow.sdk" in sys.modules or f"AIRFLOW_CONN_{conn_id.upper()}" in os.environ


def _from_environment(source: str = "environment") -> S3Settings:
    env = os.environ
    return S3Settings(
        access_key=env.get("AWS_ACCESS_KEY_ID") or None,
        secret_key=env.get("AWS_SECRET_ACCESS_KEY") or None,
        session_token=env.get("AWS_SESSION_TOKEN") or None,
        endpoint_url=env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or None,
        region=env.get("AWS_DEFAULT_REGION") or env.get("AWS_REGION") or None,
        source=source,
    )


def _from_connection(conn_id: str) -> S3Settings:
    """Credentials through the Amazon provider (it masks the secret in task logs); a connection that does not
    exist falls back to the AWS environment, as the provider itself does."""
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

    hook = AwsBaseHook(aws_conn_id=conn_id, client_type="s3")
    try:
        config = hook.conn_config
        found = config.conn_id is not None and config.conn_id != "NOTSET"
        creds = hook.get_credentials() if found else None
    except Exception as exc:
        raise StorageError(f"lake connection {conn_id!r} ({CONN_ID_ENV}): {type(exc).__name__}: {exc}") from exc
    if creds is None:
        return _from_environment()
    env = _from_environment()
    return S3Settings(
        access_key=creds.access_key,
        secret_key=creds.secret_key,
        session_token=creds.token,
        endpoint_url=config.get_service_endpoint_url("s3") or env.endpoint_url,
        region=config.region_name or env.region,
        source=f"connection {conn_id}",
    )


@cache
def s3_filesystem(settings: S3Settings) -> pafs.S3FileSystem:
    kwargs: dict[str, Any] = {}
    if settings.endpoint_url:
        scheme, _, host = settings.endpoint_url.partition("://")
        if not host or scheme not in ("http", "https"):
            raise StorageError(
                f"S3 endpoint {settings.endpoint_url!r} ({settings.source}): expected http(s)://host[:port]"
            )
        kwargs.update(endpoint_override=host.rstrip("/"), scheme=scheme)
    if settings.access_key:
        kwargs.update(
            access_key=settings.access_key, secret_key=settings.secret_key, session_token=settings.session_token
        )
    return pafs.S3FileSystem(region=settings.region or "us-east-1", **kwargs)
