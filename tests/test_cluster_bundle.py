"""What travels to a cluster's nodes (workers/cluster/bundle.py): never a file named like
a secret, and for a workspace outside git, nothing its `.gitignore` files ignore."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from workers.changes.snapshots import Store
from workers.cluster.bundle import check_out, make_bundle, travelling


def project(ws: Path) -> Path:
    for rel, text in {
        "src/app.py": "x = 1\n",
        ".gitignore": "build/\n*.log\n",
        "build/out.bin": "built\n",
        "run.log": "noise\n",
        ".env": "OPENAI_API_KEY=sk-secret\n",
        "config/.env.production": "DB_PASSWORD=secret\n",
        "deploy/id_ed25519": "-----BEGIN OPENSSH PRIVATE KEY-----\n",
        "certs/server.pem": "-----BEGIN PRIVATE KEY-----\n",
        ".aws/credentials": "[default]\naws_secret_access_key=x\n",
        ".kube/config": "token: x\n",
        "infra/prod.tfvars": 'db_password = "x"\n',
    }.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    return ws


@pytest.mark.parametrize("in_git", [False, True])
def test_secrets_and_ignored_files_never_travel(
    workspace: Path, tmp_path: Path, in_git: bool
) -> None:
    project(workspace)
    if in_git:
        subprocess.run(["git", "init", "-q", str(workspace)], check=True)
        subprocess.run(["git", "-C", str(workspace), "add", "-f", ".env"], check=True)
    store = Store(workspace)
    tree = store.snapshot()[1]
    assert sorted(travelling(store, tree)) == [".gitignore", "src/app.py"]
    node = tmp_path / "node" / "copy"
    check_out(make_bundle(store, tree), node)
    shipped = sorted(str(p.relative_to(node)) for p in node.rglob("*") if ".git" not in p.parts)
    assert shipped == [".gitignore", "src", "src/app.py"]
