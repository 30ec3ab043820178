from reportgen.cli.main import entry

entry()
