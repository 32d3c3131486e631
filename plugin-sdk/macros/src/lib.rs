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
    let function = syn::parse_macro_input!(item as ItemFn);
    match expand_tool(attr.into(), &function) {
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
    let (definition, handler_body) = match sig.inputs.len() {
        0 => (
            quote!(#private::definition_without_args::<#output>(&__TOOLHOST_ATTRS)),
            quote! {
                if let ::core::result::Result::Err(result) = #private::no_args(__TOOLHOST_ATTRS.name, arguments) {
                    return result;
                }
                #sdk::ToolOutput::into_call_result(#ident())
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
                        ::core::result::Result::Err(result) => return result,
                    };
                    #sdk::ToolOutput::into_call_result(#ident(args))
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
    };

    let registration = format_ident!("__toolhost_tool_{}", ident);
    let vis = &function.vis;
    Ok(quote! {
        #function

        #[doc(hidden)]
        #[allow(non_upper_case_globals)]
        #vis const #registration: #sdk::ToolDef = {
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
                arguments: ::core::option::Option<#sdk::JsonObject>,
            ) -> #sdk::CallToolResult {
                #handler_body
            }
            #sdk::ToolDef {
                name: __TOOLHOST_ATTRS.name,
                definition: __toolhost_definition,
                handler: __toolhost_handler,
            }
        };
    })
}

fn expand_plugin(input: proc_macro2::TokenStream) -> syn::Result<proc_macro2::TokenStream> {
    let paths = Punctuated::<Path, Token![,]>::parse_terminated.parse2(input)?;
    if paths.is_empty() {
        return Err(syn::Error::new(Span::call_site(), "list the plugin's tools: `plugin!(tool_a, tool_b)`"));
    }
    let registrations = paths.iter().map(|path| {
        let mut path = path.clone();
        if let Some(last) = path.segments.last_mut() {
            last.ident = format_ident!("__toolhost_tool_{}", last.ident);
        }
        path
    });
    let sdk = quote!(::toolhost_plugin_sdk);
    Ok(quote! {
        #[doc(hidden)]
        static __TOOLHOST_TOOLS: &[#sdk::ToolDef] = &[#(#registrations),*];

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

        #[cfg(all(target_os = "wasi", target_env = "p2"))]
        #sdk::__component::bindings::__toolhost_export_component!(__ToolhostComponent);
    })
}
