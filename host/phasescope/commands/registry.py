"""The one list of subcommands: ``name: (module, class, what it does)``. ``cli.py`` loads a
subcommand's module only when it runs; ``phasescope --help`` lists them from here."""

SUBCOMMANDS = {
    "demo": ("phasescope.commands.demo", "DemoCommand", "trace the bundled phased workload"),
    "replay": ("phasescope.commands.replay", "ReplayCommand", "re-run the tracker over a log or .bb file"),
    "export-bbv": ("phasescope.commands.export_bbv", "ExportBbvCommand", "log -> SimPoint .bb"),
    "bench": ("phasescope.commands.bench", "BenchCommand", "overhead vs native"),
    "score": ("phasescope.commands.score", "ScoreCommand", "score a log's phases (ISCA 2003 Fig. 6)"),
    "reference": ("phasescope.commands.reference", "ReferenceCommand", "SimPoint-style labels of a log"),
    "plot": ("phasescope.commands.plot", "PlotCommand", "figures of a log"),
    "locality-model": ("phasescope.commands.locality_model", "LocalityModelCommand",
                       "miss rates for inputs never run"),
    "help": ("phasescope.commands.help", "HelpCommand", "tracker, all, or a subcommand"),
}
#: the live monitor: ``phasescope [options]`` without a subcommand
DEFAULT = ("phasescope.commands.monitor", "MonitorCommand")
