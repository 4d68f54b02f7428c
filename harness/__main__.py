from harness.cli.launch import console

# Guarded: the metric writer is a spawned process, which imports __main__.
if __name__ == "__main__":
    console()
