// Run: dotnet run --project samples/Folio.Samples.WebApi   (then: curl -X POST localhost:5000/notes -H 'content-type:
// application/json' -d '{"title":"hi"}')
Folio.Samples.WebApi.WebApiApp.Create(args).Run();
