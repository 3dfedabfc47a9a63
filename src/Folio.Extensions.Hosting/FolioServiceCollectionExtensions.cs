using Folio.Extensions.Hosting;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection.Extensions;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Options;

namespace Microsoft.Extensions.DependencyInjection;

/// <summary>Registers Folio in a host's services.</summary>
public static class FolioServiceCollectionExtensions
{
    /// <summary>
    /// Registers one <see cref="Folio.DocumentStore"/> for the application, with settings bound from
    /// <paramref name="configuration"/> (usually <c>configuration.GetSection("Folio")</c>).
    /// </summary>
    /// <param name="services">The services.</param>
    /// <param name="configuration">The section holding <see cref="FolioOptions"/>.</param>
    /// <param name="configure">Optional code settings applied after the bound values.</param>
    /// <returns><paramref name="services"/>.</returns>
    /// <remarks>See <see cref="AddFolio(IServiceCollection, Action{FolioOptions})"/> for what is registered.</remarks>
    public static IServiceCollection AddFolio(this IServiceCollection services, IConfiguration configuration,
        Action<FolioOptions>? configure = null)
    {
        ArgumentNullException.ThrowIfNull(services);
        ArgumentNullException.ThrowIfNull(configuration);
        services.AddOptions<FolioOptions>().Bind(configuration);
        if (configure is not null)
        {
            services.Configure(configure);
        }

        return AddCore(services);
    }

    /// <summary>
    /// Registers one <see cref="Folio.DocumentStore"/> for the application, configured in code.
    /// </summary>
    /// <param name="services">The services.</param>
    /// <param name="configure">Sets <see cref="FolioOptions"/>; <see cref="FolioOptions.Path"/> is required.</param>
    /// <returns><paramref name="services"/>.</returns>
    /// <remarks>
    /// Registers: <see cref="FolioOptions"/> validated when the host starts (<c>ValidateOnStart</c>: a bad setting
    /// throws <see cref="OptionsValidationException"/> naming it); a hosted service that opens the store at start and
    /// closes it at shutdown (pending commits finished, journal synced); the <see cref="Folio.DocumentStore"/> as a
    /// singleton using the container's <c>ILoggerFactory</c> and <c>IMeterFactory</c>; and a scoped
    /// <see cref="Folio.DocumentSession"/> (one per request in ASP.NET Core, disposed with the scope). Calling it twice
    /// adds the settings of both calls and still registers one store.
    /// </remarks>
    public static IServiceCollection AddFolio(this IServiceCollection services, Action<FolioOptions> configure)
    {
        ArgumentNullException.ThrowIfNull(services);
        ArgumentNullException.ThrowIfNull(configure);
        services.AddOptions<FolioOptions>().Configure(configure);
        return AddCore(services);
    }

    private static IServiceCollection AddCore(IServiceCollection services)
    {
        services.AddOptions<FolioOptions>().ValidateOnStart();
        services.TryAddEnumerable(ServiceDescriptor.Singleton<IValidateOptions<FolioOptions>, FolioOptionsValidator>());
        if (services.Any(static d => d.ServiceType == typeof(FolioStoreHost)))
        {
            return services;
        }

        services.AddMetrics();
        services.AddSingleton<FolioStoreHost>();
        services.AddSingleton<IHostedService>(static sp => sp.GetRequiredService<FolioStoreHost>());
        services.AddSingleton(static sp => sp.GetRequiredService<FolioStoreHost>().Store);
        services.AddScoped(static sp => sp.GetRequiredService<Folio.DocumentStore>().OpenSession());
        return services;
    }
}
