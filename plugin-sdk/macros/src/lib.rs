//! Procedural macros of `toolhost-plugin-sdk`: `#[tool]` and `plugin!`.
//!
//! They stay thin: they read the function's signature and attributes and
//! expand to calls into `toolhost_plugin_sdk::__private`, where the logic
//! lives. Errors are reported as compile errors on the offending tokens.

use proc_macro::TokenStream;
use proc_macro2::Span;
use quote::{format_ident, quote};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, FnArg, ItemFn, Lit, LitBool, LitStr, Meta, Path, ReturnType, Token};

/// Make a function a tool.
///
/// The function takes one argument whose type implements
/// `serde::Deserialize + schemars::JsonSchema` (or none), and returns any
/// `toolhost_plugin_sdk::ToolOutput`. Its doc comment becomes the tool's
/// description. Options:
///
/// - `name = "..."`: the tool's name (default: the function's name);
/// - `title = "..."`: display name;
/// - `description = "..."`: instead of the doc comment;
/// - `read_only`, `destructive`, `idempotent`, `open_world` (or `= false`):
///   the tool's annotation hints;
/// - `secrets = ["API_KEY", ...]`: secrets the tool needs, declared as
///   `_meta.requirements.secrets`; the host hands exactly these to the plugin
///   (read them with `toolhost_plugin_sdk::secret`);
/// - `user_id`: the tool acts for a user (`_meta.requirements.user_id`); the
///   host calls it only with the caller's user id, which
///   `toolhost_plugin_sdk::user_id()` returns.
///
/// ```ignore
/// /// Add two numbers.
/// #[tool(title = "Add", read_only, idempotent)]
/// fn add(args: AddArgs) -> f64 { args.a + args.b }
/// ```
#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand_attribute(attr, item, expand_tool)
}

/// Make a function a prompt.
///
/// The function takes one argument whose type implements
/// `serde::Deserialize + schemars::JsonSchema` (its properties are the
/// prompt's arguments, which are strings), or none, and returns any
/// `toolhost_plugin_sdk::PromptOutput` (a `String` is one user message).
/// Its doc comment becomes the prompt's description. Options: `name`,
/// `title`, `description`.
///
/// ```ignore
/// /// A greeting for someone.
/// #[prompt]
/// fn greeting(Greeting { name }: Greeting) -> String { format!("Greet {name}.") }
/// ```
#[proc_macro_attribute]
pub fn prompt(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand_attribute(attr, item, expand_prompt)
}

/// Make a function a resource (`uri = "..."`) or a resource template
/// (`template = "memo://{id}"`).
///
/// A resource's function takes nothing; a template's takes nothing or one
/// argument deserialized from the template's variables (strings). It
/// returns any `toolhost_plugin_sdk::ResourceOutput`: a `String` (text),
/// `Vec<u8>` (bytes), `ResourceContents`, or a `Result` of one. Its doc
/// comment becomes the description. Options: `uri` or `template` (one of
/// them), `name` (default: the function's), `title`, `description`,
/// `mime_type`.
///
/// ```ignore
/// /// Today's motto.
/// #[resource(uri = "motto://today", mime_type = "text/plain")]
/// fn motto() -> String { "Measure twice, cut once.".into() }
/// ```
#[proc_macro_attribute]
pub fn resource(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand_attribute(attr, item, expand_resource)
}

/// An attribute on a function: the function and its registration, or the
/// function as written and the error (so the rest of the crate still
/// resolves it).
fn expand_attribute(
    attr: TokenStream,
    item: TokenStream,
    expand: fn(proc_macro2::TokenStream, &ItemFn) -> syn::Result<proc_macro2::TokenStream>,
) -> TokenStream {
    let function = syn::parse_macro_input!(item as ItemFn);
    match expand(attr.into(), &function) {
        Ok(tokens) => tokens.into(),
        Err(error) => {
            let error = error.to_compile_error();
            quote!(#function #error).into()
        }
    }
}

/// Export the plugin's tools: generates the `describe` and `call` exports.
///
/// ```ignore
/// plugin!(add, subtract, multiply, divide);
/// ```
#[proc_macro]
pub fn plugin(input: TokenStream) -> TokenStream {
    match expand_plugin(input.into()) {
        Ok(tokens) => tokens.into(),
        Err(error) => error.to_compile_error().into(),
    }
}

#[derive(Default)]
struct ToolOptions {
    secrets: Vec<LitStr>,
    name: Option<LitStr>,
    title: Option<LitStr>,
    description: Option<LitStr>,
    read_only: Option<LitBool>,
    destructive: Option<LitBool>,
    idempotent: Option<LitBool>,
    open_world: Option<LitBool>,
    user_id: Option<LitBool>,
}

fn parse_options(attr: proc_macro2::TokenStream) -> syn::Result<ToolOptions> {
    let mut options = ToolOptions::default();
    let parser = syn::meta::parser(|meta| {
        let key = meta.path.get_ident().map(ToString::to_string).unwrap_or_default();
        let string = |meta: &syn::meta::ParseNestedMeta| -> syn::Result<LitStr> { meta.value()?.parse() };
        let flag = |meta: &syn::meta::ParseNestedMeta| -> syn::Result<LitBool> {
            if meta.input.peek(Token![=]) { meta.value()?.parse() } else { Ok(LitBool::new(true, meta.path.span())) }
        };
        match key.as_str() {
            "name" => options.name = Some(string(&meta)?),
            "title" => options.title = Some(string(&meta)?),
            "description" => options.description = Some(string(&meta)?),
            "read_only" => options.read_only = Some(flag(&meta)?),
            "destructive" => options.destructive = Some(flag(&meta)?),
            "idempotent" => options.idempotent = Some(flag(&meta)?),
            "open_world" => options.open_world = Some(flag(&meta)?),
            "user_id" => options.user_id = Some(flag(&meta)?),
            "secrets" => {
                let list: syn::ExprArray = meta.value()?.parse()?;
                for element in list.elems {
                    match element {
                        Expr::Lit(ExprLit { lit: Lit::Str(s), .. }) => options.secrets.push(s),
                        other => {
                            return Err(syn::Error::new(
                                other.span(),
                                "secrets are listed as string literals: secrets = [\"API_KEY\"]",
                            ));
                        }
                    }
                }
            }
            _ => {
                return Err(meta.error(
                    "unknown tool option; expected one of: name, title, description, \
                     read_only, destructive, idempotent, open_world, secrets, user_id",
                ));
            }
        }
        Ok(())
    });
    parser.parse2(attr)?;
    Ok(options)
}

/// The doc comment's text: lines joined, one leading space stripped.
fn doc_comment(function: &ItemFn) -> String {
    let lines: Vec<String> = function
        .attrs
        .iter()
        .filter_map(|attr| match &attr.meta {
            Meta::NameValue(nv) if nv.path.is_ident("doc") => match &nv.value {
                Expr::Lit(ExprLit { lit: Lit::Str(s), .. }) => Some(s.value()),
                _ => None,
            },
            _ => None,
        })
        .map(|line| line.strip_prefix(' ').unwrap_or(&line).trim_end().to_owned())
        .collect();
    lines.join("\n").trim().to_owned()
}

fn option_bool(value: &Option<LitBool>) -> proc_macro2::TokenStream {
    match value {
        Some(b) => quote!(::core::option::Option::Some(#b)),
        None => quote!(::core::option::Option::None),
    }
}

fn expand_tool(attr: proc_macro2::TokenStream, function: &ItemFn) -> syn::Result<proc_macro2::TokenStream> {
    let options = parse_options(attr)?;
    let sig = &function.sig;
    if let Some(asyncness) = &sig.asyncness {
        return Err(syn::Error::new(asyncness.span(), "a tool function cannot be `async`"));
    }
    if !sig.generics.params.is_empty() {
        return Err(syn::Error::new(sig.generics.span(), "a tool function cannot be generic"));
    }
    let ident = &sig.ident;
    let name = options.name.clone().unwrap_or_else(|| LitStr::new(&ident.to_string(), ident.span()));
    let description = match &options.description {
        Some(d) => d.value(),
        None => doc_comment(function),
    };
    if description.is_empty() {
        return Err(syn::Error::new(
            ident.span(),
            "a tool needs a description: write a doc comment on the function \
             or give `#[tool(description = \"...\")]`",
        ));
    }
    let title = match &options.title {
        Some(t) => quote!(::core::option::Option::Some(#t)),
        None => quote!(::core::option::Option::None),
    };
    let (read_only, destructive, idempotent, open_world) = (
        option_bool(&options.read_only),
        option_bool(&options.destructive),
        option_bool(&options.idempotent),
        option_bool(&options.open_world),
    );
    let secrets = &options.secrets;
    let user_id = options.user_id.as_ref().is_some_and(LitBool::value);
    let output = match &sig.output {
        ReturnType::Default => quote!(()),
        ReturnType::Type(_, ty) => quote!(#ty),
    };

    let sdk = quote!(::toolhost_plugin_sdk);
    let private = quote!(#sdk::__private);
    let (definition, handler_body) = tool_handler(sig, &output)?;

    let value = quote! {{
        const __TOOLHOST_ATTRS: #private::Attributes = #private::Attributes {
            name: #name,
            title: #title,
            description: #description,
            read_only: #read_only,
            destructive: #destructive,
            idempotent: #idempotent,
            open_world: #open_world,
            secrets: &[#(#secrets),*],
            user_id: #user_id,
        };
        fn __toolhost_definition() -> #sdk::Tool {
            #definition
        }
        fn __toolhost_handler(
            arguments: #private::Arguments<'_>,
        ) -> ::core::option::Option<#private::Output> {
            #handler_body
        }
        #sdk::ToolDef {
            name: __TOOLHOST_ATTRS.name,
            definition: __toolhost_definition,
            handler: __toolhost_handler,
        }
    }};
    Ok(registered(function, Kind::Tool, quote!(#sdk::ToolDef), value))
}
/// A tool's definition (its schemas from its argument and output types) and
/// its handler's body (arguments parsed into its argument type, or none
/// accepted).
fn tool_handler(
    sig: &syn::Signature,
    output: &proc_macro2::TokenStream,
) -> syn::Result<(proc_macro2::TokenStream, proc_macro2::TokenStream)> {
    let ident = &sig.ident;
    let sdk = quote!(::toolhost_plugin_sdk);
    let private = quote!(#sdk::__private);
    Ok(match sig.inputs.len() {
        0 => (
            quote!(#private::definition_without_args::<#output>(&__TOOLHOST_ATTRS)),
            quote! {
                if let ::core::result::Result::Err(refused) = #private::no_args(__TOOLHOST_ATTRS.name, arguments) {
                    return refused.map(#private::Output::from);
                }
                ::core::option::Option::Some(#sdk::ToolOutput::into_output(#ident()))
            },
        ),
        1 => {
            let ty = match &sig.inputs[0] {
                FnArg::Typed(pat_type) => &pat_type.ty,
                FnArg::Receiver(receiver) => {
                    return Err(syn::Error::new(receiver.span(), "a tool is a free function, not a method"));
                }
            };
            (
                quote!(#private::definition_with_args::<#ty, #output>(&__TOOLHOST_ATTRS)),
                quote! {
                    let args: #ty = match #private::parse_args(__TOOLHOST_ATTRS.name, arguments) {
                        ::core::result::Result::Ok(args) => args,
                        ::core::result::Result::Err(refused) => return refused.map(#private::Output::from),
                    };
                    ::core::option::Option::Some(#sdk::ToolOutput::into_output(#ident(args)))
                },
            )
        }
        _ => {
            return Err(syn::Error::new(
                sig.inputs.span(),
                "a tool takes one argument: a struct deriving `Deserialize` and `JsonSchema` \
                 (put every parameter in it)",
            ));
        }
    })
}

/// Options of `#[prompt]` and `#[resource]`.
#[derive(Default)]
struct OfferOptions {
    name: Option<LitStr>,
    title: Option<LitStr>,
    description: Option<LitStr>,
    uri: Option<LitStr>,
    template: Option<LitStr>,
    mime_type: Option<LitStr>,
}

fn parse_offer_options(attr: proc_macro2::TokenStream, resource: bool) -> syn::Result<OfferOptions> {
    let mut options = OfferOptions::default();
    let parser = syn::meta::parser(|meta| {
        let key = meta.path.get_ident().map(ToString::to_string).unwrap_or_default();
        let value = || -> syn::Result<LitStr> { meta.value()?.parse() };
        match key.as_str() {
            "name" => options.name = Some(value()?),
            "title" => options.title = Some(value()?),
            "description" => options.description = Some(value()?),
            "uri" if resource => options.uri = Some(value()?),
            "template" if resource => options.template = Some(value()?),
            "mime_type" if resource => options.mime_type = Some(value()?),
            _ if resource => {
                return Err(meta.error(
                    "unknown resource option; expected one of: uri, template, name, title, description, mime_type",
                ));
            }
            _ => return Err(meta.error("unknown prompt option; expected one of: name, title, description")),
        }
        Ok(())
    });
    parser.parse2(attr)?;
    Ok(options)
}

/// The checks every offer function passes: a free, synchronous,
/// non-generic function with at most one argument (its type returned).
fn offer_argument<'a>(function: &'a ItemFn, what: &str) -> syn::Result<Option<&'a syn::Type>> {
    let sig = &function.sig;
    if let Some(asyncness) = &sig.asyncness {
        return Err(syn::Error::new(asyncness.span(), format!("a {what} function cannot be `async`")));
    }
    if !sig.generics.params.is_empty() {
        return Err(syn::Error::new(sig.generics.span(), format!("a {what} function cannot be generic")));
    }
    match sig.inputs.len() {
        0 => Ok(None),
        1 => match &sig.inputs[0] {
            FnArg::Typed(pat_type) => Ok(Some(&pat_type.ty)),
            FnArg::Receiver(receiver) => {
                Err(syn::Error::new(receiver.span(), format!("a {what} is a free function, not a method")))
            }
        },
        _ => Err(syn::Error::new(
            sig.inputs.span(),
            format!("a {what} takes at most one argument: a struct deriving `Deserialize` (put every parameter in it)"),
        )),
    }
}

fn option_str(value: &Option<LitStr>) -> proc_macro2::TokenStream {
    match value {
        Some(s) => quote!(::core::option::Option::Some(#s)),
        None => quote!(::core::option::Option::None),
    }
}

fn expand_prompt(attr: proc_macro2::TokenStream, function: &ItemFn) -> syn::Result<proc_macro2::TokenStream> {
    let options = parse_offer_options(attr, false)?;
    let argument = offer_argument(function, "prompt")?;
    let ident = &function.sig.ident;
    let name = options.name.clone().unwrap_or_else(|| LitStr::new(&ident.to_string(), ident.span()));
    let description = options.description.as_ref().map_or_else(|| doc_comment(function), LitStr::value);
    if description.is_empty() {
        return Err(syn::Error::new(
            ident.span(),
            "a prompt needs a description: write a doc comment on the function or give `#[prompt(description = \"...\")]`",
        ));
    }
    let title = option_str(&options.title);
    let sdk = quote!(::toolhost_plugin_sdk);
    let private = quote!(#sdk::__private);
    let (definition, body) = match argument {
        None => (
            quote!(#private::prompt_without_args(#name, #title, #description)),
            quote! {
                if !arguments.is_empty() {
                    return ::core::result::Result::Err(::std::format!("the prompt `{}` takes no arguments", #name));
                }
                #sdk::PromptOutput::into_prompt_result(#ident())
            },
        ),
        Some(ty) => (
            quote!(#private::prompt_with_args::<#ty>(#name, #title, #description)),
            quote! {
                let args: #ty = #private::parse_strings(&::std::format!("the prompt `{}`", #name), arguments)?;
                #sdk::PromptOutput::into_prompt_result(#ident(args))
            },
        ),
    };
    let value = quote! {{
        fn __toolhost_definition() -> #sdk::protocol::Prompt {
            #definition
        }
        fn __toolhost_handler(
            arguments: #sdk::JsonObject,
        ) -> ::core::result::Result<#sdk::protocol::GetPromptResult, ::std::string::String> {
            #body
        }
        #sdk::PromptDef { name: #name, definition: __toolhost_definition, handler: __toolhost_handler }
    }};
    Ok(registered(function, Kind::Prompt, quote!(#sdk::PromptDef), value))
}

fn expand_resource(attr: proc_macro2::TokenStream, function: &ItemFn) -> syn::Result<proc_macro2::TokenStream> {
    let options = parse_offer_options(attr, true)?;
    let argument = offer_argument(function, "resource")?;
    let ident = &function.sig.ident;
    let (uri, template) = match (&options.uri, &options.template) {
        (Some(uri), None) => (uri.clone(), false),
        (None, Some(template)) => (template.clone(), true),
        _ => {
            return Err(syn::Error::new(
                ident.span(),
                "a resource has a `uri = \"...\"` or, for a family of resources, a `template = \"scheme://{var}\"` (one of them)",
            ));
        }
    };
    if argument.is_some() && !template {
        return Err(syn::Error::new(
            function.sig.inputs.span(),
            "a resource with a fixed `uri` takes no argument; a `template`'s function may take its variables",
        ));
    }
    let name = options.name.clone().unwrap_or_else(|| LitStr::new(&ident.to_string(), ident.span()));
    let description = options.description.as_ref().map_or_else(|| doc_comment(function), LitStr::value);
    let (title, mime_type) = (option_str(&options.title), option_str(&options.mime_type));
    let sdk = quote!(::toolhost_plugin_sdk);
    let private = quote!(#sdk::__private);
    let call = match argument {
        None => quote!(#ident()),
        Some(ty) => quote! {{
            let args: #ty = #private::parse_strings(&::std::format!("the resource template `{}`", #uri), variables)?;
            #ident(args)
        }},
    };
    let value = quote! {{
        fn __toolhost_definition() -> #sdk::Value {
            #private::resource_definition(#uri, #template, #name, #title, #description, #mime_type)
        }
        #[allow(unused_variables)]
        fn __toolhost_handler(
            uri: &str,
            variables: #sdk::JsonObject,
        ) -> ::core::result::Result<#sdk::protocol::ReadResourceResult, ::std::string::String> {
            #private::read_result(#call, uri, #mime_type)
        }
        #sdk::ResourceDef {
            uri: #uri,
            template: #template,
            definition: __toolhost_definition,
            handler: __toolhost_handler,
        }
    }};
    Ok(registered(function, Kind::Resource, quote!(#sdk::ResourceDef), value))
}

/// What an attribute registers.
#[derive(Clone, Copy)]
enum Kind {
    Tool,
    Prompt,
    Resource,
}

impl Kind {
    /// The prefix of its registrations' names (`plugin!` finds them by it).
    fn prefix(self) -> &'static str {
        match self {
            Kind::Tool => "toolhost_tool_",
            Kind::Prompt => "toolhost_prompt_",
            Kind::Resource => "toolhost_resource_",
        }
    }
}

/// `function`, and its registration: a constant of type `ty` holding
/// `value`, named by [`Kind::prefix`] and the function's name.
/// Crate-visible, never public, and spanned as the user's code
/// ([`user_spanned`]): one `plugin!` does not list is dead code, and the
/// compiler says so (`toolhost_tool_<name>` is never used) rather than the
/// tool silently missing from the plugin.
fn registered(
    function: &ItemFn,
    kind: Kind,
    ty: proc_macro2::TokenStream,
    value: proc_macro2::TokenStream,
) -> proc_macro2::TokenStream {
    let ident = &function.sig.ident;
    let registration = format_ident!("{}{}", kind.prefix(), ident, span = ident.span());
    let item = user_spanned(
        quote! {
            #[doc(hidden)]
            #[allow(non_upper_case_globals)]
            pub(crate) const #registration: #ty = #value;
        },
        ident.span(),
    );
    quote! {
        #function

        #item
    }
}

/// The item's own tokens (not those inside its brackets) spanned as the
/// user's function name: the compiler then treats the item as the user's
/// code, and reports it as dead code when `plugin!` does not list it (it
/// does not for items spanned as a macro's expansion).
fn user_spanned(item: proc_macro2::TokenStream, span: Span) -> proc_macro2::TokenStream {
    item.into_iter()
        .map(|mut token| {
            token.set_span(span);
            token
        })
        .collect()
}

/// `plugin!`'s input: tools alone (`a, b`), or sections
/// (`tools: [a, b], prompts: [p], resources: [r]`).
struct PluginItems {
    tools: Vec<Path>,
    prompts: Vec<Path>,
    resources: Vec<Path>,
}

impl syn::parse::Parse for PluginItems {
    fn parse(input: syn::parse::ParseStream<'_>) -> syn::Result<Self> {
        let mut items = PluginItems { tools: Vec::new(), prompts: Vec::new(), resources: Vec::new() };
        let sectioned = input.peek(syn::Ident) && input.peek2(Token![:]) && !input.peek2(Token![::]);
        if !sectioned {
            items.tools = Punctuated::<Path, Token![,]>::parse_terminated(input)?.into_iter().collect();
            return Ok(items);
        }
        while !input.is_empty() {
            let key: syn::Ident = input.parse()?;
            input.parse::<Token![:]>()?;
            let content;
            syn::bracketed!(content in input);
            let paths: Vec<Path> = Punctuated::<Path, Token![,]>::parse_terminated(&content)?.into_iter().collect();
            match key.to_string().as_str() {
                "tools" => items.tools.extend(paths),
                "prompts" => items.prompts.extend(paths),
                "resources" => items.resources.extend(paths),
                _ => return Err(syn::Error::new(key.span(), "expected `tools`, `prompts` or `resources`")),
            }
            if !input.is_empty() {
                input.parse::<Token![,]>()?;
            }
        }
        Ok(items)
    }
}

/// `path` with its last segment named as its registration of `kind`.
fn registration_path(path: &Path, kind: Kind) -> Path {
    let mut path = path.clone();
    if let Some(last) = path.segments.last_mut() {
        last.ident = format_ident!("{}{}", kind.prefix(), last.ident);
    }
    path
}

fn expand_plugin(input: proc_macro2::TokenStream) -> syn::Result<proc_macro2::TokenStream> {
    let items: PluginItems = syn::parse2(input)?;
    if items.tools.is_empty() && items.prompts.is_empty() && items.resources.is_empty() {
        return Err(syn::Error::new(
            Span::call_site(),
            "list the plugin's tools: `plugin!(tool_a, tool_b)`, or with prompts and resources \
             `plugin! { tools: [...], prompts: [...], resources: [...] }`",
        ));
    }
    let registrations = items.tools.iter().map(|path| registration_path(path, Kind::Tool));
    let prompts = items.prompts.iter().map(|path| registration_path(path, Kind::Prompt));
    let resources = items.resources.iter().map(|path| registration_path(path, Kind::Resource));
    let sdk = quote!(::toolhost_plugin_sdk);
    // The Extism exports of prompts and resources, when there are some.
    let prompt_exports = (!items.prompts.is_empty()).then(|| prompt_exports(&sdk));
    let resource_exports = (!items.resources.is_empty()).then(|| resource_exports(&sdk));
    let component = component_exports(&sdk);
    Ok(quote! {
        #[doc(hidden)]
        static __TOOLHOST_TOOLS: &[#sdk::ToolDef] = &[#(#registrations),*];
        #[doc(hidden)]
        #[allow(dead_code)]
        static __TOOLHOST_PROMPTS: &[#sdk::PromptDef] = &[#(#prompts),*];
        #[doc(hidden)]
        #[allow(dead_code)]
        static __TOOLHOST_RESOURCES: &[#sdk::ResourceDef] = &[#(#resources),*];

        #prompt_exports
        #resource_exports

        /// The `describe` export (Extism flavour): this plugin's tools.
        #[cfg(not(all(target_os = "wasi", target_env = "p2")))]
        #[unsafe(no_mangle)]
        pub extern "C" fn describe() -> i32 {
            #sdk::__private::describe(__TOOLHOST_TOOLS)
        }

        /// The `call` export (Extism flavour): runs one tool.
        #[cfg(not(all(target_os = "wasi", target_env = "p2")))]
        #[unsafe(no_mangle)]
        pub extern "C" fn call() -> i32 {
            #sdk::__private::call(__TOOLHOST_TOOLS)
        }

        #component
    })
}

/// The Extism exports of a plugin's prompts.
fn prompt_exports(sdk: &proc_macro2::TokenStream) -> proc_macro2::TokenStream {
    quote! {
        /// The `list_prompts` export (Extism flavour).
        #[cfg(not(all(target_os = "wasi", target_env = "p2")))]
        #[unsafe(no_mangle)]
        pub extern "C" fn list_prompts() -> i32 {
            #sdk::__private::offer(|_| ::core::result::Result::Ok(#sdk::offers::list_prompts(__TOOLHOST_PROMPTS)))
        }

        /// The `get_prompt` export (Extism flavour).
        #[cfg(not(all(target_os = "wasi", target_env = "p2")))]
        #[unsafe(no_mangle)]
        pub extern "C" fn get_prompt() -> i32 {
            #sdk::__private::offer(|request| {
                let name = request["name"].as_str().unwrap_or_default();
                let arguments = request["arguments"].as_object().cloned().unwrap_or_default();
                #sdk::offers::get_prompt(__TOOLHOST_PROMPTS, name, arguments)
            })
        }
    }
}

/// The Extism exports of a plugin's resources.
fn resource_exports(sdk: &proc_macro2::TokenStream) -> proc_macro2::TokenStream {
    quote! {
        /// The `list_resources` export (Extism flavour).
        #[cfg(not(all(target_os = "wasi", target_env = "p2")))]
        #[unsafe(no_mangle)]
        pub extern "C" fn list_resources() -> i32 {
            #sdk::__private::offer(|_| ::core::result::Result::Ok(#sdk::offers::list_resources(__TOOLHOST_RESOURCES)))
        }

        /// The `list_resource_templates` export (Extism flavour).
        #[cfg(not(all(target_os = "wasi", target_env = "p2")))]
        #[unsafe(no_mangle)]
        pub extern "C" fn list_resource_templates() -> i32 {
            #sdk::__private::offer(|_| {
                ::core::result::Result::Ok(#sdk::offers::list_resource_templates(__TOOLHOST_RESOURCES))
            })
        }

        /// The `read_resource` export (Extism flavour).
        #[cfg(not(all(target_os = "wasi", target_env = "p2")))]
        #[unsafe(no_mangle)]
        pub extern "C" fn read_resource() -> i32 {
            #sdk::__private::offer(|request| {
                #sdk::offers::read_resource(__TOOLHOST_RESOURCES, request["uri"].as_str().unwrap_or_default())
            })
        }
    }
}

/// The component flavour's exports (`wasm32-wasip2`), over the plugin's
/// tools, prompts and resources.
fn component_exports(sdk: &proc_macro2::TokenStream) -> proc_macro2::TokenStream {
    quote! {
        /// The component flavour (`wasm32-wasip2`): the `toolhost:plugin`
        /// world's exports, over the same tools.
        #[cfg(all(target_os = "wasi", target_env = "p2"))]
        #[doc(hidden)]
        pub struct __ToolhostComponent;

        #[cfg(all(target_os = "wasi", target_env = "p2"))]
        impl #sdk::__component::bindings::Guest for __ToolhostComponent {
            fn describe() -> ::std::vec::Vec<#sdk::__component::bindings::Tool> {
                #sdk::__component::describe(__TOOLHOST_TOOLS)
            }

            fn call(
                name: ::std::string::String,
                arguments: ::std::string::String,
            ) -> ::std::result::Result<#sdk::__component::bindings::CallToolResult, #sdk::__component::bindings::CallError> {
                #sdk::__component::call(__TOOLHOST_TOOLS, name, arguments)
            }
        }

        /// What the plugin offers besides tools (component flavour; its
        /// lists may be empty).
        #[cfg(all(target_os = "wasi", target_env = "p2"))]
        impl #sdk::__component::bindings::exports::toolhost::plugin::offers::Guest for __ToolhostComponent {
            fn list_prompts() -> ::std::string::String {
                #sdk::__component::json(&#sdk::offers::list_prompts(__TOOLHOST_PROMPTS))
            }

            fn get_prompt(
                name: ::std::string::String,
                arguments: ::std::string::String,
            ) -> ::std::result::Result<::std::string::String, ::std::string::String> {
                #sdk::__component::get_prompt(__TOOLHOST_PROMPTS, name, arguments)
            }

            fn list_resources() -> ::std::string::String {
                #sdk::__component::json(&#sdk::offers::list_resources(__TOOLHOST_RESOURCES))
            }

            fn list_resource_templates() -> ::std::string::String {
                #sdk::__component::json(&#sdk::offers::list_resource_templates(__TOOLHOST_RESOURCES))
            }

            fn read_resource(
                uri: ::std::string::String,
            ) -> ::std::result::Result<::std::string::String, ::std::string::String> {
                #sdk::__component::read_resource(__TOOLHOST_RESOURCES, uri)
            }
        }

        #[cfg(all(target_os = "wasi", target_env = "p2"))]
        #sdk::__component::bindings::__toolhost_export_component!(__ToolhostComponent);
    }
}
