from rag.cli import main

main()
