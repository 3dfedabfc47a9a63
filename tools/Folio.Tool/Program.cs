using System.CommandLine;
using Folio.Tool;

// folio: operate a Folio store from the command line (README.md, "Operations").
var root = new RootCommand(
    "folio: inspect, verify, compact, back up, restore, export, import and replay a Folio store.")
{
    InfoCommand.Create(),
    VerifyCommand.Create(),
    CompactCommand.Create(),
    BackupCommand.Create(),
    RestoreCommand.Create(),
    ExportCommand.Create(),
    ImportCommand.Create(),
    TailCommand.Create(),
};
return await root.Parse(args).InvokeAsync().ConfigureAwait(false);
