"""The JVM worker (`worker/` here): built at set-up (`build`), run as a worker program (`program`), its runtime's
pauses read back (`safepoints`). No system lives here: a system hands its release's jars to `program`."""
