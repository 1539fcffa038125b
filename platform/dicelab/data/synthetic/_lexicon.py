"""Word lists shared by the synthetic generators: names, places, organisations, events, everyday words.

Some names are deliberately ambiguous (Jordan, Florence, Lincoln: a person or a place), so that a tagger
needs context as well as the gazetteers.
"""

from __future__ import annotations

FEMALE_NAMES = (
    "Maria", "Anna", "Laura", "Sofia", "Elena", "Julia", "Clara", "Nina", "Helen", "Sarah", "Emma", "Olivia",
    "Grace", "Alice", "Irene", "Paula", "Monica", "Rachel", "Diana", "Lucy", "Karen", "Teresa", "Ingrid",
    "Marta", "Yuki", "Amira", "Leila", "Priya", "Chloe", "Hannah", "Rosa", "Eva", "Vera", "Ruth", "Nadia",
    "Fatima", "Mei", "Greta", "Sonia", "Lena",
)  # fmt: skip
MALE_NAMES = (
    "David", "Peter", "Michael", "Thomas", "Daniel", "Carlos", "Ahmed", "Kenji", "Lars", "Pavel", "Marco",
    "Hugo", "Oscar", "Victor", "Samuel", "Adam", "Ivan", "Felix", "Omar", "Ravi", "Jonas", "Henrik",
    "Paolo", "Rafael", "Tomas", "Stefan", "Luis", "Martin", "Simon", "George", "Arthur", "Leon", "Mateo",
    "Nikolai", "Hassan", "Diego", "Bruno", "Anton", "Erik", "Joseph",
)  # fmt: skip
# first names that are also places (see AMBIGUOUS_PLACES)
AMBIGUOUS_FIRST_NAMES = (
    "Jordan",
    "Florence",
    "Lincoln",
    "Victoria",
    "Austin",
    "Chelsea",
    "Georgia",
    "Sydney",
)
SURNAMES = (
    "Lopez", "Schmidt", "Novak", "Tanaka", "Johansson", "Rossi", "Kowalski", "Dubois", "Moreau", "Silva",
    "Costa", "Petrov", "Jensen", "Nielsen", "Fischer", "Weber", "Keller", "Brennan", "Murphy", "Walsh",
    "Okafor", "Mensah", "Haddad", "Nasser", "Kaur", "Sharma", "Chen", "Wang", "Kim", "Park", "Nguyen",
    "Tran", "Ortiz", "Ramos", "Vargas", "Castro", "Larsen", "Berg", "Lindqvist", "Horvat", "Varga",
    "Popescu", "Ivanova", "Sato", "Suzuki", "Ito", "Dalton", "Hartley", "Whitmore", "Ashford", "Carver",
    "Fontaine", "Marchetti", "Bianchi", "Greco", "Ferreira", "Almeida", "Duarte", "Becker", "Wagner",
)  # fmt: skip
CITIES = (
    "Oslo", "Lisbon", "Madrid", "Vienna", "Prague", "Warsaw", "Dublin", "Helsinki", "Athens", "Cairo",
    "Nairobi", "Lagos", "Accra", "Lima", "Bogota", "Quito", "Santiago", "Toronto", "Chicago", "Denver",
    "Seattle", "Boston", "Atlanta", "Montreal", "Osaka", "Kyoto", "Seoul", "Manila", "Jakarta", "Hanoi",
    "Mumbai", "Delhi", "Karachi", "Dhaka", "Tehran", "Ankara", "Kiev", "Minsk", "Riga", "Tallinn",
    "Vilnius", "Zagreb", "Belgrade", "Sofia", "Bucharest", "Budapest", "Munich", "Hamburg", "Lyon",
    "Marseille", "Milan", "Naples", "Turin", "Porto", "Seville", "Valencia", "Geneva", "Zurich", "Antwerp",
    "Rotterdam", "Glasgow", "Leeds", "Cardiff", "Belfast", "Perth", "Auckland", "Wellington", "Havana",
)  # fmt: skip
MULTIWORD_PLACES = (
    "New York", "Buenos Aires", "Hong Kong", "Rio de Janeiro", "Cape Town", "San Diego", "Kuala Lumpur",
    "Tel Aviv", "Abu Dhabi", "Sao Paulo", "Mexico City", "Los Angeles", "New Delhi", "Las Vegas",
)  # fmt: skip
COUNTRIES = (
    "France", "Germany", "Spain", "Italy", "Norway", "Sweden", "Poland", "Brazil", "Chile", "Peru", "Kenya",
    "Ghana", "Nigeria", "Egypt", "India", "Japan", "Vietnam", "Canada", "Mexico", "Turkey", "Greece",
    "Portugal", "Austria", "Hungary", "Romania", "Ireland", "Finland", "Denmark", "Morocco", "Argentina",
)  # fmt: skip
AMBIGUOUS_PLACES = ("Jordan", "Florence", "Lincoln", "Victoria", "Austin", "Chelsea", "Georgia", "Sydney")
ORG_SUFFIXES = ("Corp", "Holdings", "Group", "Bank", "Airlines", "Motors", "Energy", "Telecom", "Systems")
ORG_PATTERNS = (
    "{surname} {suffix}",
    "{city} {suffix}",
    "Bank of {city}",
    "University of {city}",
    "{city} United",
    "{surname} and {surname2}",
)
NATIONALITIES = (
    "French", "German", "Spanish", "Italian", "Norwegian", "Swedish", "Polish", "Brazilian", "Chilean",
    "Kenyan", "Nigerian", "Egyptian", "Indian", "Japanese", "Canadian", "Mexican", "Turkish", "Greek",
    "Irish", "Finnish", "Danish", "Dutch", "Russian", "Chinese", "Korean", "American", "British",
)  # fmt: skip
EVENTS = (
    "World Cup", "Olympic Games", "Tour de France", "Champions League", "Davis Cup", "Grand Prix",
    "Paris Air Show", "Cannes Film Festival", "Nobel Prize", "Super Bowl", "Wimbledon", "Euro Cup",
)  # fmt: skip
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
    "November", "December",
)  # fmt: skip
JOBS = (
    "engineer", "teacher", "nurse", "lawyer", "architect", "pilot", "chemist", "journalist", "accountant",
    "designer", "surgeon", "economist", "librarian", "translator", "geologist", "pharmacist",
)  # fmt: skip
