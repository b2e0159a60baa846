from scheduler_emulator.cli import main

main()
