from raycluster_operator.cli import main

main()
