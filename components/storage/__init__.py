"""Where bytes live and what they are: the one file-system seam (`fs.py`) and
its S3 bounds, the input listing and fingerprints, code and content
digests, and the layouts on disk that several stages share (an
artifact's split folders, the checkpoints)."""
