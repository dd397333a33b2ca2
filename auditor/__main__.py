from auditor.cli.app import main

main()
