"""Create the MLflow artifact bucket in MinIO if it is missing (run once by docker-compose.yaml).

Credentials and the endpoint come from the environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
MLFLOW_S3_ENDPOINT_URL.
"""

import os
import sys

import boto3
from botocore.exceptions import ClientError


def main(bucket: str) -> None:
    s3 = boto3.client("s3", endpoint_url=os.environ["MLFLOW_S3_ENDPOINT_URL"])
    try:
        s3.head_bucket(Bucket=bucket)
        print(f"bucket {bucket} exists")
    except ClientError:
        s3.create_bucket(Bucket=bucket)
        print(f"created bucket {bucket}")


if __name__ == "__main__":
    main(sys.argv[1])
