"""The lake: its layout and atomic commits, local or S3 storage, the raw sample schemas, the runs it holds."""
