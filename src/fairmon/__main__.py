"""``python -m fairmon``: the same command line as the ``fairmon`` script."""

from fairmon.pipelines.faces.cli import main

if __name__ == "__main__":
    main()
