from click.testing import CliRunner

from raycluster_operator import __version__
from raycluster_operator.cli import main


def test_version_is_printed() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0
    assert __version__ in result.output
